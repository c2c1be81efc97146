//! Data-driven validation cases: a base manifest, a patch, and the exact diagnostics expected.

use serde_json::{Value, json};

use crate::desired::Flavour;
use crate::secrets::MapSecrets;
use crate::validate::validate;

/// A canary secret value: it must never appear outside a sensitive parameter.
pub const CANARY_PASSWORD: &str = "canary-pw-7f3a";
/// A canary key (public keys from refs are handled as secrets).
pub const CANARY_KEY: &str = "ssh-ed25519 AAAAcanaryKEY+/= alice@canary";

/// The cluster's SOPS document in these tests.
pub fn secrets() -> MapSecrets {
    MapSecrets::from_pairs(&[
        ("cloud-init.passwords.root", CANARY_PASSWORD),
        ("cloud-init.ssh-keys.alice", CANARY_KEY),
        (
            "cloud-init.ssh-keys.team",
            "ssh-rsa AAAAteam1 bob@h\nssh-ed25519 AAAAteam2 carol@h\n",
        ),
        ("cloud-init.ssh-keys.blank", "   \n"),
        ("cloud-init.ssh-keys.empty", ""),
        ("cloud-init.ssh-keys.notakey", "canary-not-a-key"),
        ("cloud-init.passwords.empty", ""),
    ])
}

/// A valid VM manifest.
pub fn base() -> Value {
    json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": "VM",
        "metadata": {"name": "web-01"},
        "spec": {
            "node": "pve01",
            "vmid": 100,
            "memory": "2GiB",
            "cpu": {"type": "host", "cores": 2},
            "disks": [{"storage": "local-lvm", "size": "32GiB"}],
            "networks": [{"bridge": "vmbr0"}]
        }
    })
}

/// Set (or with `null`, remove) the value at a `/`-separated path below the document root.
/// Numeric segments index lists.
pub fn patch(doc: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.split('/').collect();
    let (last, parents) = parts.split_last().unwrap();
    let mut cur = doc;
    for p in parents {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => {
                if cur.get(*p).is_none() {
                    cur[*p] = json!({});
                }
                &mut cur[*p]
            }
        };
    }
    match (last.parse::<usize>(), value.is_null()) {
        (Ok(i), _) => {
            let list = cur.as_array_mut().unwrap();
            if i == list.len() {
                list.push(value);
            } else {
                list[i] = value;
            }
        }
        (Err(_), true) => {
            cur.as_object_mut().unwrap().remove(*last);
        }
        (Err(_), false) => cur[*last] = value,
    }
}

/// Validate `base()` with `patches` as `flavour`; expect exactly the `(path, message)` errors
/// and warnings given (errors and warnings together, in order), or none.
fn check(flavour: Flavour, patches: &[(&str, Value)], expected: &[(&str, &str)]) {
    let mut doc = base();
    if flavour == Flavour::Template {
        doc["kind"] = json!("TemplateVM");
    }
    for (p, v) in patches {
        patch(&mut doc, p, v.clone());
    }
    let diags = match validate(flavour, &doc, &secrets()) {
        Ok(v) => v.warnings,
        Err(d) => d,
    };
    let got: Vec<(&str, &str)> = diags
        .iter()
        .map(|d| (d.path.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(got, expected, "patches {patches:?}");
}

fn vm(patches: &[(&str, Value)], expected: &[(&str, &str)]) {
    check(Flavour::Vm, patches, expected);
}

#[test]
fn base_is_valid() {
    vm(&[], &[]);
    check(Flavour::Template, &[], &[]);
}

#[test]
fn required_fields() {
    vm(
        &[("spec/node", Value::Null)],
        &[("spec.node", "is required")],
    );
    vm(
        &[("spec/vmid", Value::Null)],
        &[("spec.vmid", "is required")],
    );
    vm(
        &[("spec/memory", Value::Null)],
        &[("spec.memory", "is required")],
    );
    vm(&[("spec/cpu", Value::Null)], &[("spec.cpu", "is required")]);
    vm(
        &[("spec/cpu/cores", Value::Null)],
        &[("spec.cpu.cores", "is required")],
    );
    vm(
        &[("spec/cpu/type", json!(""))],
        &[("spec.cpu.type", "must not be empty")],
    );
    vm(
        &[("spec/networks", Value::Null)],
        &[("spec.networks", "is required")],
    );
    vm(
        &[("spec/networks", json!([]))],
        &[("spec.networks", "needs at least one network interface")],
    );
    vm(
        &[("spec/disks", Value::Null)],
        &[(
            "spec.disks",
            "needs at least one disk (or spec.clone to clone a TemplateVM)",
        )],
    );
    vm(
        &[("spec/disks/0/storage", Value::Null)],
        &[("spec.disks[0].storage", "is required")],
    );
    vm(
        &[("spec/networks/0/bridge", Value::Null)],
        &[("spec.networks[0].bridge", "is required")],
    );
}

#[test]
fn unknown_fields() {
    vm(
        &[("spec/disks/0/sdd", json!(true))],
        &[(
            "spec.disks[0].sdd",
            "unknown field `sdd`; did you mean `ssd`?",
        )],
    );
    vm(
        &[("spec/memroy", json!("1GiB"))],
        &[(
            "spec.memroy",
            "unknown field `memroy`; did you mean `memory`?",
        )],
    );
    vm(
        &[("spec/hardware/bois", json!("ovmf"))],
        &[(
            "spec.hardware.bois",
            "unknown field `bois`; did you mean `bios`?",
        )],
    );
    vm(
        &[("spec/options/on-boot", json!(true))],
        &[(
            "spec.options.on-boot",
            "unknown field `on-boot`; did you mean `onboot`?",
        )],
    );
}

#[test]
fn ids_and_sizes() {
    vm(
        &[("spec/vmid", json!(99))],
        &[("spec.vmid", "must be from 100 to 999999999, got 99")],
    );
    vm(
        &[("spec/vmid", json!("100"))],
        &[(
            "spec.vmid",
            "expected an integer from 100 to 999999999, got a string",
        )],
    );
    vm(
        &[("spec/memory", json!("8GB"))],
        &[(
            "spec.memory",
            "decimal unit `GB` is not accepted; use the binary unit `GiB`",
        )],
    );
    vm(
        &[("spec/memory", json!(2048))],
        &[(
            "spec.memory",
            "size `2048` has no unit; write it with a binary unit such as `2048MiB` or `2048GiB`",
        )],
    );
    vm(
        &[("spec/memory", json!("8MiB"))],
        &[(
            "spec.memory",
            "must be at least 16MiB (PVE's minimum), got 8MiB",
        )],
    );
    vm(
        &[("spec/memory", json!("1536KiB"))],
        &[(
            "spec.memory",
            "must be a whole number of MiB (PVE stores MiB), got 1572864 bytes",
        )],
    );
    vm(
        &[("spec/disks/0/size", json!("1536MiB"))],
        &[(
            "spec.disks[0].size",
            "must be a whole number of GiB (PVE allocates disks in GiB), got 1536MiB",
        )],
    );
    vm(
        &[("spec/disks/0/size", Value::Null)],
        &[("spec.disks[0].size", "is required")],
    );
    vm(
        &[("spec/cpu/cores", json!(0))],
        &[("spec.cpu.cores", "must be from 1 to 4096, got 0")],
    );
    vm(
        &[("metadata/name", json!("Web_01"))],
        &[(
            "metadata.name",
            "`Web_01` contains `W`; use lower-case letters, digits and `-` only (a DNS label)",
        )],
    );
    vm(
        &[("kind", json!("TemplateVM"))],
        &[("kind", "must be `VM`, got `TemplateVM`")],
    );
}

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

#[test]
fn clone_and_cloud_init_data_rules() {
    vm(
        &[("spec/clone", json!("golden-tpl"))],
        &[(
            "spec.disks",
            "must be empty when spec.clone is set: a clone inherits the template's disk layout",
        )],
    );
    vm(
        &[
            ("spec/clone", json!("golden-tpl")),
            ("spec/disks", Value::Null),
        ],
        &[],
    );
    vm(
        &[(
            "spec/cloud-init-data/ssh-keys",
            json!(["*", "ssh-ed25519 AAAA user@h"]),
        )],
        &[(
            "spec.cloud-init-data.ssh-keys",
            "mixes the `*` sentinel (PVE owns the keys) with real keys; use either [\"*\"] or the keys",
        )],
    );
    vm(
        &[
            (
                "spec/cloud-init-data/ssh-keys",
                json!(["ssh-ed25519 AAAA user@h"]),
            ),
            (
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.alice"]),
            ),
        ],
        &[(
            "spec.cloud-init-data.ssh-key-refs",
            "ssh-keys and ssh-key-refs are exclusive; keep one of them",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ci-password-ref",
            json!("passwords.root"),
        )],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`passwords.root` is not a SOPS reference; expected `cloud-init.passwords.<name>`",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ssh-key-refs",
            json!(["cloud-init.ssh-key.alice"]),
        )],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-key.alice` is not a SOPS reference; expected `cloud-init.ssh-keys.<name>`",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ipconfigs",
            json!([{"nic": 1, "ip": "10.0.0.5/24"}]),
        )],
        &[(
            "spec.cloud-init-data.ipconfigs[0].nic",
            "net1 is not declared in spec.networks",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ipconfigs",
            json!([{"nic": 0, "ip": "10.0.0.5", "gateway": "10.0.0.1"}]),
        )],
        &[(
            "spec.cloud-init-data.ipconfigs[0].ip",
            "`10.0.0.5` is not an IPv4 address with prefix length, e.g. 192.168.0.50/24",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/nameservers",
            json!(["1.1.1.1", "dns"]),
        )],
        &[(
            "spec.cloud-init-data.nameservers[1]",
            "`dns` is not an IP address",
        )],
    );
}

#[test]
fn options_tags_extra() {
    vm(
        &[("spec/options/startup", json!("first"))],
        &[(
            "spec.options.startup",
            "`first` is not a PVE startup value; expected e.g. `order=10` or `order=1,up=30,down=60`",
        )],
    );
    vm(
        &[("spec/options/hotplug", json!("disk,nic"))],
        &[(
            "spec.options.hotplug",
            "unknown hotplug feature `nic`; expected a comma list of `cloudinit`, `cpu`, `disk`, `memory`, `network`, `usb` (or `0` / `1`)",
        )],
    );
    vm(
        &[("spec/options/boot-order", json!(["scsi0", "cdrom"]))],
        &[(
            "spec.options.boot-order",
            "`cdrom` is not a boot device; expected disk slots (scsi0, ide2, ...) or NICs (net0, ...)",
        )],
    );
    vm(
        &[
            ("spec/cpu/type", json!("kvm64")),
            ("spec/options/nested-virt", json!(true)),
        ],
        &[(
            "spec.options.nested-virt",
            "PVE 9.2 has no nestedvirt key: nested virtualisation needs spec.cpu.type: host (and nesting enabled in the host's kvm module)",
        )],
    );
    vm(
        &[("spec/tags", json!(["Web", "-bad"]))],
        &[(
            "spec.tags[1]",
            "`-bad` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`",
        )],
    );
    vm(
        &[("spec/extra/memory", json!(4096))],
        &[(
            "spec.extra.memory",
            "`memory` is modelled by spec.memory; set it there instead of in extra",
        )],
    );
    vm(
        &[("spec/extra/net3", json!("virtio,bridge=vmbr0"))],
        &[(
            "spec.extra.net3",
            "`net3` is modelled by spec.networks; set it there instead of in extra",
        )],
    );
    vm(
        &[
            ("spec/extra/ostype", json!("l26")),
            ("spec/extra/kvm", json!(true)),
        ],
        &[],
    );
    vm(
        &[("spec/pve-name", json!("web_01"))],
        &[(
            "spec.pve-name",
            "`web_01` is not a valid PVE name; use letters, digits, `-` and `.` (no `_` or spaces)",
        )],
    );
}

#[test]
fn normalised_desired_state() {
    let mut doc = base();
    patch(&mut doc, "spec/tags", json!(["Web", "db", "web"]));
    patch(&mut doc, "spec/memory", json!("8GiB"));
    patch(
        &mut doc,
        "spec/disks/1",
        json!({"storage": "local-lvm", "size": "1TiB", "interface": "virtio0"}),
    );
    patch(&mut doc, "spec/networks/0/mac", json!("bc:24:11:aa:bb:cc"));
    patch(
        &mut doc,
        "spec/hardware/cloud-init",
        json!({"enabled": true, "storage": "local-lvm"}),
    );
    patch(&mut doc, "spec/hardware/cdrom", json!({"iso": "none"}));
    patch(
        &mut doc,
        "spec/hardware/pci-devices",
        json!([{"slot": 1, "device": "0000:0A:00.0", "pcie": true}]),
    );
    let v = validate(Flavour::Vm, &doc, &secrets()).unwrap();
    let got = serde_json::to_value(&v.desired).unwrap();
    assert_eq!(
        got,
        json!({
            "kind": "VM", "name": "web-01", "node": "pve01", "vmid": 100, "state": "started",
            "memory-mib": 8192,
            "cpu": {"type": "host", "cores": 2},
            "disks": [
                {"slot": "scsi0", "storage": "local-lvm", "size-gib": 32},
                {"slot": "virtio0", "storage": "local-lvm", "size-gib": 1024}
            ],
            "networks": [{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:AA:BB:CC"}],
            "hardware": {
                "cdrom": {"slot": "ide3", "iso": "none", "media": "cdrom"},
                "cloud-init": {"storage": "local-lvm"},
                "pci-devices": [{"slot": 1, "device": "0000:0a:00.0", "pcie": true}]
            },
            "options": {},
            "pve-name": "web-01",
            "tags": ["db", "proxops", "proxops-100", "web"]
        })
    );
    // The desired state reads back as itself.
    let back: crate::Desired = serde_json::from_value(got).unwrap();
    assert_eq!(back, v.desired);
}

#[test]
fn secret_refs_resolve_at_validation() {
    let refs = |r: &[&str]| ("spec/cloud-init-data/ssh-key-refs", json!(r));
    vm(
        &[refs(&[
            "cloud-init.ssh-keys.alice",
            "cloud-init.ssh-keys.team",
        ])],
        &[],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.bob"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.bob` is not in the cluster's SOPS document; add it, or fix the reference",
        )],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.empty"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.empty` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.blank"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs",
            "the references resolve to no keys; an empty key set is never written as \"no keys\"",
        )],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.notakey"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.notakey` does not hold OpenSSH public keys (one `<type> <base64> [comment]` per line)",
        )],
    );
    // A malformed ref is reported once, structurally, and not looked up.
    vm(
        &[refs(&["cloud-init.ssh-keys."])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.` is not a SOPS reference; expected `cloud-init.ssh-keys.<name>`",
        )],
    );
    let pw = |r: &str| ("spec/cloud-init-data/ci-password-ref", json!(r));
    vm(&[pw("cloud-init.passwords.root")], &[]);
    vm(
        &[pw("cloud-init.passwords.admin")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.passwords.admin` is not in the cluster's SOPS document; add it, or fix the reference",
        )],
    );
    vm(
        &[pw("cloud-init.passwords.empty")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.passwords.empty` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    vm(
        &[pw("cloud-init.ssh-keys.alice")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.ssh-keys.alice` is not a SOPS reference; expected `cloud-init.passwords.<name>`",
        )],
    );
    // Denied (the kind has no secrets grant) fails closed; the desired state keeps refs only.
    let mut doc = base();
    patch(
        &mut doc,
        "spec/cloud-init-data/ci-password-ref",
        json!("cloud-init.passwords.root"),
    );
    let err = validate(Flavour::Vm, &doc, &crate::secrets::NoSecrets).unwrap_err();
    assert_eq!(
        err[0].message,
        "cannot resolve `cloud-init.passwords.root`: this kind is not granted access to the cluster's SOPS secrets; grant it, or remove the reference"
    );
    let ok = validate(Flavour::Vm, &doc, &secrets()).unwrap();
    let text = serde_json::to_string(&ok.desired).unwrap();
    assert!(
        text.contains("\"ci-password-ref\":\"cloud-init.passwords.root\""),
        "{text}"
    );
    assert!(!text.contains(CANARY_PASSWORD));
}

#[test]
fn image_iso_and_clone_rules() {
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
        &[(
            "spec/hardware/cdrom",
            json!({"iso": "debian-13", "media": "disk"}),
        )],
        &[(
            "spec.hardware.cdrom.media",
            "must be `cdrom` when an ISO is attached (PVE requires media=cdrom for iso volumes)",
        )],
    );
    vm(
        &[(
            "spec/hardware/cdrom",
            json!({"iso": "none", "media": "disk"}),
        )],
        &[],
    );
    vm(
        &[
            ("spec/clone", json!("golden")),
            (
                "spec/disks",
                json!([{"storage": "local-lvm", "image": "noble"}]),
            ),
        ],
        &[(
            "spec.disks",
            "must be empty when spec.clone is set: a clone inherits the template's disk layout",
        )],
    );
}
