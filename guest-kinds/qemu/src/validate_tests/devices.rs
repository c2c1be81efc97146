//! Validation cases: disks, NICs, hardware and templates.

use super::*;

#[test]
fn disk_rules() {
    vm(
        &[
            ("spec/disks/0/interface", json!("virtio0")),
            ("spec/disks/0/ssd", json!(true)),
        ],
        &[(
            "spec.disks[0].ssd",
            "is not supported on virtio disks: PVE 9.2 rejects ssd= on virtio/nvme; use a scsi, sata or ide slot or remove ssd",
        )],
    );
    vm(
        &[("spec/disks/0/interface", json!("nvme0"))],
        &[(
            "spec.disks[0].interface",
            "`nvme0`: PVE 9.2 has no nvme disk bus; use scsi, sata, virtio or ide",
        )],
    );
    vm(
        &[
            ("spec/disks/0/interface", json!("sata0")),
            ("spec/disks/0/ssd", json!(false)),
        ],
        &[],
    );
    vm(
        &[
            ("spec/disks/0/interface", json!("sata0")),
            ("spec/disks/0/iothread", json!(true)),
        ],
        &[(
            "spec.disks[0].iothread",
            "is not supported on sata disks; PVE accepts iothread on scsi and virtio only",
        )],
    );
    vm(
        &[("spec/disks/0/interface", json!("scsi31"))],
        &[(
            "spec.disks[0].interface",
            "`scsi31`: scsi slots go from scsi0 to scsi30",
        )],
    );
    vm(
        &[(
            "spec/disks/1",
            json!({"storage": "local-lvm", "size": "10GiB", "interface": "scsi0"}),
        )],
        &[(
            "spec.disks[1].interface",
            "slot scsi0 is already used by spec.disks[0]",
        )],
    );
    vm(
        &[(
            "spec/disks/1",
            json!({"storage": "local-lvm", "size": "10GiB"}),
        )],
        &[],
    );
    vm(
        &[("spec/disks/0/image", json!("noble"))],
        &[(
            "spec.disks[0].size",
            "must be empty when image is set (an imported disk takes its size from the image)",
        )],
    );
    vm(
        &[
            ("spec/disks/0/image", json!("noble")),
            ("spec/disks/0/size", Value::Null),
        ],
        &[],
    );
    vm(
        &[("spec/disks/0/controller", json!("virtio-scsi"))],
        &[(
            "spec.disks[0].controller",
            "must be one of `lsi`, `lsi53c810`, `virtio-scsi-pci`, `virtio-scsi-single`, `megasas`, `pvscsi`, got `virtio-scsi`",
        )],
    );
    vm(
        &[
            ("spec/disks/0/controller", json!("virtio-scsi-single")),
            (
                "spec/disks/1",
                json!({"storage": "local-lvm", "size": "10GiB", "controller": "lsi"}),
            ),
        ],
        &[(
            "spec.disks[1].controller",
            "ignored: the VM-wide controller is `virtio-scsi-single`, set by spec.disks[0] (the first disk declaring it wins)",
        )],
    );
    vm(
        &[("spec/disks/0/discard", json!("off"))],
        &[(
            "spec.disks[0].discard",
            "must be one of `ignore`, `on`, got `off`",
        )],
    );
    vm(
        &[("spec/disks/0/aio", json!("uring"))],
        &[(
            "spec.disks[0].aio",
            "must be one of `native`, `threads`, `io_uring`, got `uring`",
        )],
    );
    vm(
        &[("spec/disks/0/storage", json!("Local LVM"))],
        &[(
            "spec.disks[0].storage",
            "`Local LVM` is not a PVE storage id (lower-case letters, digits, `-`, `_`, `.`)",
        )],
    );
    vm(
        &[
            (
                "spec/hardware/cloud-init",
                json!({"enabled": true, "storage": "local-lvm"}),
            ),
            ("spec/disks/0/interface", json!("ide2")),
        ],
        &[(
            "spec.disks[0].interface",
            "slot ide2 is already used by spec.hardware.cloud-init",
        )],
    );
    vm(
        &[
            ("spec/hardware/cdrom", json!({"iso": "none"})),
            ("spec/disks/0/interface", json!("ide2")),
        ],
        &[(
            "spec.disks[0].interface",
            "slot ide2 is already used by spec.hardware.cdrom",
        )],
    );
}

#[test]
fn nic_rules() {
    vm(
        &[("spec/networks/0/vlan", json!(0))],
        &[("spec.networks[0].vlan", "must be from 1 to 4094, got 0")],
    );
    vm(
        &[("spec/networks/0/vlan", json!(4095))],
        &[("spec.networks[0].vlan", "must be from 1 to 4094, got 4095")],
    );
    vm(
        &[("spec/networks/0/mac", json!("01:24:11:AA:BB:CC"))],
        &[(
            "spec.networks[0].mac",
            "`01:24:11:AA:BB:CC` is not a unicast MAC address; expected six hex pairs like BC:24:11:AA:BB:CC with an even first octet",
        )],
    );
    vm(
        &[("spec/networks/0/model", json!("virtio-net"))],
        &[(
            "spec.networks[0].model",
            "must be one of `e1000`, `e1000-82540em`, `e1000-82544gc`, `e1000-82545em`, `e1000e`, `i82551`, `i82557b`, `i82559er`, `ne2k_isa`, `ne2k_pci`, `pcnet`, `rtl8139`, `virtio`, `vmxnet3`, got `virtio-net`",
        )],
    );
    vm(
        &[("spec/networks/1", json!({"bridge": "vmbr1", "slot": 0}))],
        &[(
            "spec.networks[1].slot",
            "slot net0 is already used by spec.networks[0]",
        )],
    );
    vm(
        &[(
            "spec/networks/1",
            json!({"bridge": "vmbr1", "slot": "net5"}),
        )],
        &[],
    );
    vm(
        &[("spec/networks/0/slot", json!("eth0"))],
        &[(
            "spec.networks[0].slot",
            "`eth0` is not a NIC slot; expected net0 to net31 (or 0 to 31)",
        )],
    );
    vm(
        &[("spec/networks/0/rate-limit", json!(-1))],
        &[("spec.networks[0].rate-limit", "must be at least 0, got -1")],
    );
}

#[test]
fn hardware_rules() {
    vm(
        &[("spec/hardware/efi-disk", json!({"storage": "local-lvm"}))],
        &[(
            "spec.hardware.efi-disk",
            "requires spec.hardware.bios: ovmf (an EFI vars disk is only used by OVMF)",
        )],
    );
    vm(
        &[
            ("spec/hardware/bios", json!("ovmf")),
            (
                "spec/hardware/efi-disk",
                json!({"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"}),
            ),
        ],
        &[],
    );
    vm(
        &[
            ("spec/hardware/bios", json!("ovmf")),
            (
                "spec/hardware/efi-disk",
                json!({"storage": "local-lvm", "template": "8m"}),
            ),
        ],
        &[(
            "spec.hardware.efi-disk.template",
            "`8m` is not accepted by PVE 9.2 (efitype is `2m` or `4m`); use `4m`",
        )],
    );
    vm(
        &[
            ("spec/hardware/tpm", json!({"storage": "local-lvm"})),
            ("spec/hardware/bios", json!("ovmf")),
        ],
        &[(
            "spec.hardware.tpm",
            "requires spec.hardware.bios: ovmf and spec.hardware.machine: q35",
        )],
    );
    vm(
        &[
            ("spec/hardware/tpm", json!({"storage": "local-lvm"})),
            ("spec/hardware/bios", json!("ovmf")),
            ("spec/hardware/machine", json!("q35")),
        ],
        &[],
    );
    vm(
        &[("spec/hardware/machine", json!("pc"))],
        &[(
            "spec.hardware.machine",
            "must be one of `i440fx`, `q35`, got `pc`",
        )],
    );
    vm(
        &[("spec/hardware/cloud-init", json!({"enabled": true}))],
        &[("spec.hardware.cloud-init.storage", "is required")],
    );
    vm(
        &[("spec/hardware/cdrom", json!({"media": "dvd"}))],
        &[(
            "spec.hardware.cdrom.media",
            "must be one of `cdrom`, `disk`, got `dvd`",
        )],
    );
    vm(
        &[("spec/hardware/serial0", json!("tty0"))],
        &[(
            "spec.hardware.serial0",
            "must be `socket` or a host device path such as /dev/ttyS0, got `tty0`",
        )],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "device": "0000:01:00.0"}, {"slot": 0, "device": "02:00"}]),
        )],
        &[(
            "spec.hardware.pci-devices[1].slot",
            "slot hostpci0 is already used by spec.hardware.pci-devices[0]",
        )],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 1000, "device": "01:00.0"}]),
        )],
        &[(
            "spec.hardware.pci-devices[0].slot",
            "must be from 0 to 999, got 1000",
        )],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "device": "01:0.0"}]),
        )],
        &[(
            "spec.hardware.pci-devices[0].device",
            "`01:0.0` is not a PCI address; expected domain:bus:slot[.func] such as 0000:01:00.0",
        )],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "device": "0000:0A:00.0"}]),
        )],
        &[],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "mapping": "gpu-0"}]),
        )],
        &[],
    );
    let one_of = "give exactly one of `device` (a raw host PCI address; PVE lets only root@pam write it) or `mapping` (a PVE resource mapping, usable with an API token that has Mapping.Use)";
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "mapping": "gpu0", "device": "01:00.0"}]),
        )],
        &[("spec.hardware.pci-devices[0]", one_of)],
    );
    vm(
        &[("spec/hardware/pci-devices", json!([{"slot": 0}]))],
        &[("spec.hardware.pci-devices[0]", one_of)],
    );
    vm(
        &[(
            "spec/hardware/pci-devices",
            json!([{"slot": 0, "mapping": "0gpu"}]),
        )],
        &[(
            "spec.hardware.pci-devices[0].mapping",
            "`0gpu` is not a PVE resource mapping id; use letters, digits, `-` and `_`, starting with a letter",
        )],
    );
    vm(
        &[("spec/tags", json!(["web", "proxops-7"]))],
        &[(
            "spec.tags[1]",
            "`proxops-7`: tags starting with `proxops-` are reserved for proxops's ownership marks",
        )],
    );
}

#[test]
fn template_rules() {
    check(
        Flavour::Template,
        &[("spec/state", json!("started"))],
        &[(
            "spec.state",
            "a TemplateVM must be `stopped` (PVE refuses to start a template)",
        )],
    );
    check(Flavour::Template, &[("spec/state", json!("stopped"))], &[]);
}
