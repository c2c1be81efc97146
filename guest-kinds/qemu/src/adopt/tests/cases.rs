//! Data-driven adoptions: live configs of every shape the VM kind knows, each adopted,
//! validated and planned against the same live state, with the gaps and spec it must give.

use super::*;

/// One data-driven case: a live config, what adopt leaves out, what the first plan reports.
struct Case {
    name: &'static str,
    flavour: Flavour,
    status: &'static str,
    config: Value,
    pending: &'static [(&'static str, Option<&'static str>)],
    gaps: &'static [&'static str],
    anomalies: &'static [&'static str],
    /// Checks on the manifest's spec: (JSON pointer, value).
    spec: Vec<(&'static str, Value)>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            flavour: Flavour::Vm,
            status: "stopped",
            config: web(),
            pending: &[],
            gaps: &["smbios1", "vmgenid"],
            anomalies: &[],
            spec: Vec::new(),
        }
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "several disks on scsi, virtio and sata with flags",
            config: with(
                web(),
                json!({
                    "scsi0": "local-lvm:vm-100-disk-0,aio=io_uring,discard=on,iothread=1,size=32G,ssd=1",
                    "scsi10": "ceph:vm-100-disk-3,size=100G,cache=writeback",
                    "virtio1": "local-lvm:vm-100-disk-1,discard=ignore,iothread=0,size=10240M",
                    "sata2": "local-zfs:vm-100-disk-2,size=1T,ssd=0,backup=0",
                    "boot": "order=scsi0;virtio1;net0",
                }),
            ),
            gaps: &["sata2.backup", "scsi10.cache", "smbios1", "vmgenid"],
            spec: vec![
                (
                    "/disks/0",
                    json!({"interface": "scsi0", "storage": "local-lvm", "size": "32GiB", "iothread": true, "discard": "on", "ssd": true, "aio": "io_uring", "controller": "virtio-scsi-single"}),
                ),
                (
                    "/disks/1",
                    json!({"interface": "scsi10", "storage": "ceph", "size": "100GiB"}),
                ),
                (
                    "/disks/2",
                    json!({"interface": "virtio1", "storage": "local-lvm", "size": "10GiB", "iothread": false, "discard": "ignore"}),
                ),
                (
                    "/disks/3",
                    json!({"interface": "sata2", "storage": "local-zfs", "size": "1024GiB", "ssd": false}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "several NICs with vlan, firewall, rate and unmodelled tokens",
            status: "running",
            config: with(
                web(),
                json!({
                    "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,tag=20",
                    "net1": "e1000=bc:24:11:00:00:02,bridge=vmbr1,rate=12.5,mtu=9000",
                    "net3": "model=vmxnet3,macaddr=BC:24:11:00:00:03,bridge=vmbr2,firewall=0,link_down=1",
                }),
            ),
            gaps: &["net1.mtu", "net3.link_down", "smbios1", "vmgenid"],
            spec: vec![
                (
                    "/networks",
                    json!([
                        {"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F", "vlan": 20, "firewall": true},
                        {"slot": 1, "model": "e1000", "bridge": "vmbr1", "mac": "BC:24:11:00:00:02", "rate-limit": 12.5},
                        {"slot": 3, "model": "vmxnet3", "bridge": "vmbr2", "mac": "BC:24:11:00:00:03", "firewall": false},
                    ]),
                ),
                ("/state", json!("started")),
            ],
            ..Case::default()
        },
        Case {
            name: "q35, OVMF, EFI disk, TPM, mapped and raw PCI passthrough",
            config: with(
                web(),
                json!({
                    "bios": "ovmf", "machine": "pc-q35-9.2+pve1",
                    "efidisk0": "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M",
                    "tpmstate0": "local-lvm:vm-100-disk-2,size=4M,version=v2.0",
                    "hostpci0": "mapping=gpu,pcie=1", "hostpci1": "0000:02:00.0,x-vga=1",
                    "vga": "virtio,memory=64", "cpu": "x86-64-v2-AES,hidden=1,flags=+aes",
                    "sockets": 2, "numa": 1, "serial0": "socket",
                }),
            ),
            gaps: &[
                "cpu.flags",
                "hostpci1.x-vga",
                "machine",
                "smbios1",
                "vga.memory",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/hardware",
                    json!({
                        "machine": "q35", "bios": "ovmf", "display": "virtio", "serial0": "socket",
                        "sockets": 2, "numa": true,
                        "efi-disk": {"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"},
                        "tpm": {"storage": "local-lvm", "version": "v2.0"},
                        "pci-devices": [{"slot": 0, "mapping": "gpu", "pcie": true}, {"slot": 1, "device": "0000:02:00.0"}],
                    }),
                ),
                ("/cpu", json!({"type": "x86-64-v2-AES", "cores": 2})),
                ("/options/hidden", json!(true)),
            ],
            ..Case::default()
        },
        Case {
            name: "cloud-init with user, ipconfig, DNS and keys all in SOPS",
            status: "running",
            config: with(
                web(),
                json!({
                    "ide2": "local-lvm:vm-100-cloudinit,media=cdrom,size=4M",
                    "ide3": "none,media=cdrom",
                    "ciuser": "deploy", "cipassword": "**********", "citype": "nocloud",
                    "sshkeys": "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h%0Assh-rsa%20AAAAB3NzaC1yc2EAAAADadoptB%20bob%40h%0A",
                    "ipconfig0": "ip=192.168.0.50/24,gw=192.168.0.1", "ipconfig1": "ip=dhcp",
                    "net1": "virtio=BC:24:11:00:00:02,bridge=vmbr1",
                    "nameserver": "1.1.1.1 9.9.9.9", "searchdomain": "example.org",
                    "cicustom": "user=local:snippets/u.yaml", "ciupgrade": 0,
                }),
            ),
            gaps: &[
                "cicustom",
                "cipassword",
                "ciupgrade",
                "ipconfig1",
                "smbios1",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/hardware",
                    json!({"cloud-init": {"enabled": true, "storage": "local-lvm"}, "cdrom": {"iso": "none", "media": "cdrom"}}),
                ),
                (
                    "/cloud-init-data",
                    json!({
                        "ci-user": "deploy",
                        "ssh-key-refs": ["cloud-init.ssh-keys.alice", "cloud-init.ssh-keys.bob"],
                        "nameservers": ["1.1.1.1", "9.9.9.9"], "search-domains": ["example.org"],
                        "ipconfigs": [{"nic": 0, "ip": "192.168.0.50/24", "gateway": "192.168.0.1"}],
                    }),
                ),
                ("/extra", json!({"citype": "nocloud", "ostype": "l26"})),
            ],
            ..Case::default()
        },
        Case {
            name: "a key not in SOPS redacts all keys to the sentinel",
            config: with(
                web(),
                json!({
                    "sshkeys": "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h%0Assh-ed25519%20AAAAunknown%20eve%40h",
                }),
            ),
            gaps: &["smbios1", "sshkeys", "vmgenid"],
            spec: vec![("/cloud-init-data", json!({"ssh-keys": ["*"]}))],
            ..Case::default()
        },
        Case {
            name: "a template",
            flavour: Flavour::Template,
            config: with(
                web(),
                json!({"template": 1, "name": "golden.Noble", "ide2": "local-lvm:base-9000-cloudinit,media=cdrom",
                "scsi0": "local-lvm:base-9000-disk-0,size=3584M"}),
            ),
            gaps: &["scsi0.size", "smbios1", "vmgenid"],
            anomalies: &["spec.disks[0].size"],
            spec: vec![
                ("/pve-name", json!("golden.Noble")),
                ("/disks/0/size", json!("3GiB")),
                ("/hardware/cloud-init/storage", json!("local-lvm")),
            ],
            ..Case::default()
        },
        Case {
            name: "a clone of a template (made in PVE) looks like any VM",
            config: with(
                web(),
                json!({"ide2": "local-lvm:vm-100-cloudinit,media=cdrom", "ciuser": "ops",
                "ipconfig0": "ip=10.0.0.9/24", "tags": "web"}),
            ),
            spec: vec![
                ("/tags", json!(["web"])),
                (
                    "/cloud-init-data/ipconfigs/0",
                    json!({"nic": 0, "ip": "10.0.0.9/24"}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "unknown keys: safe ones to extra, the rest to gaps",
            config: with(
                web(),
                json!({
                    "args": "-cpu host", "hookscript": "local:snippets/hook.pl", "unused0": "local-lvm:vm-100-disk-9",
                    "usb0": "host=1234:5678", "serial1": "/dev/ttyS1", "serial2": "socket", "affinity": "0-3",
                    "cpulimit": "2.5", "localtime": 1, "kvm": 1, "rng0": "source=/dev/urandom", "watchdog": "model=i6300esb",
                    "protection": 1, "onboot": 1, "agent": "enabled=1,fstrim_cloned_disks=1", "startup": "order=3,up=30",
                    "hotplug": "disk,network,usb,memory,cpu", "acpi": 1, "tablet": 0,
                }),
            ),
            gaps: &[
                "agent.fstrim_cloned_disks",
                "args",
                "hookscript",
                "serial1",
                "smbios1",
                "unused0",
                "usb0",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/extra",
                    json!({"affinity": "0-3", "cpulimit": "2.5", "kvm": "1", "localtime": "1", "ostype": "l26",
                    "rng0": "source=/dev/urandom", "serial2": "socket", "watchdog": "model=i6300esb"}),
                ),
                (
                    "/options",
                    json!({"onboot": true, "protection": true, "acpi": true, "tablet": false, "agent": true,
                    "startup": "order=3,up=30", "hotplug": "disk,network,usb,memory,cpu", "boot-order": ["scsi0", "net0"]}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "an attached ISO is left unowned",
            config: with(
                web(),
                json!({"ide2": "local:iso/debian-13.iso,media=cdrom,size=700M", "boot": "order=scsi0;ide2;net0"}),
            ),
            gaps: &["ide2", "smbios1", "vmgenid"],
            spec: vec![("/options/boot-order", json!(["scsi0", "ide2", "net0"]))],
            ..Case::default()
        },
        Case {
            name: "no cpu, cores or memory keys: PVE's defaults",
            config: with(
                web(),
                json!({"cpu": null, "cores": null, "memory": null, "boot": "cdn", "bootdisk": "scsi0"}),
            ),
            gaps: &["boot", "smbios1", "vmgenid"],
            spec: vec![
                ("/cpu", json!({"type": "kvm64", "cores": 1})),
                ("/memory", json!("512MiB")),
                ("/extra/bootdisk", json!("scsi0")),
            ],
            ..Case::default()
        },
        Case {
            name: "a running guest with pending changes keeps them pending",
            status: "running",
            pending: &[
                ("memory", Some("4096")),
                ("cores", Some("4")),
                ("net1", None),
                ("onboot", Some("1")),
            ],
            config: with(
                web(),
                json!({"net1": "virtio=BC:24:11:00:00:02,bridge=vmbr1"}),
            ),
            gaps: &["cores", "memory", "net1", "onboot", "smbios1", "vmgenid"],
            spec: vec![
                ("/memory", json!("4096MiB")),
                ("/cpu/cores", json!(4)),
                ("/options/onboot", json!(true)),
                (
                    "/networks",
                    json!([{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F"}]),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "a locked guest",
            config: with(web(), json!({"lock": "backup"})),
            gaps: &["lock", "smbios1", "vmgenid"],
            anomalies: &[""],
            ..Case::default()
        },
        Case {
            name: "a passthrough disk and a tiny disk stay undeclared",
            config: with(
                web(),
                json!({"scsi1": "/dev/disk/by-id/ata-X,size=500G", "scsi2": "local-lvm:vm-100-disk-5,size=512M"}),
            ),
            gaps: &["scsi1", "scsi2", "smbios1", "vmgenid"],
            anomalies: &["spec.disks", "spec.disks"],
            ..Case::default()
        },
        Case {
            name: "an unusable cloud-init drive slot, hostpci and ipconfig stay unowned",
            config: with(
                web(),
                json!({"sata5": "local-lvm:vm-100-cloudinit,media=cdrom", "hostpci2": "01:00.0;02:00.0",
                "ipconfig0": "ip=10.0.0.9/24,ip6=auto", "efidisk0": "local-lvm:vm-100-disk-1,size=4M", "tpmstate0": "local-lvm:vm-100-disk-2,size=4M"}),
            ),
            gaps: &[
                "efidisk0",
                "hostpci2",
                "ipconfig0",
                "sata5",
                "smbios1",
                "tpmstate0",
                "vmgenid",
            ],
            anomalies: &["spec.hardware.pci-devices"],
            ..Case::default()
        },
        Case {
            name: "a guest of unknown status (its node is offline) is adopted stopped",
            status: "unknown",
            gaps: &["smbios1", "status", "vmgenid"],
            spec: vec![("/state", json!("stopped"))],
            ..Case::default()
        },
    ]
}

#[test]
fn data_driven_round_trips_are_clean() {
    for c in cases() {
        let template = c.flavour == Flavour::Template;
        let e = entry(
            100,
            c.status,
            template,
            c.config.get("tags").and_then(Value::as_str).unwrap_or(""),
        );
        let (a, p) = clean(c.flavour, &e, &c.config, c.pending, &sops());
        assert_eq!(gap_paths(&a), c.gaps, "{}: gaps {:#?}", c.name, a.gaps);
        assert_eq!(
            anomaly_paths(&p),
            c.anomalies,
            "{}: anomalies {:#?}",
            c.name,
            p.anomalies
        );
        for (ptr, want) in &c.spec {
            assert_eq!(
                a.manifest["spec"].pointer(ptr),
                Some(want),
                "{}: spec{ptr} in {:#}",
                c.name,
                a.manifest
            );
        }
        // Nothing secret or PVE-only ends up in the manifest.
        let text = a.manifest.to_string();
        for never in [
            "**********",
            "cicustom",
            "ciupgrade",
            "AAAAC3Nza",
            "AAAAunknown",
            "hookscript",
            "args",
        ] {
            assert!(
                !text.contains(never),
                "{}: manifest carries {never}: {text}",
                c.name
            );
        }
    }
}
