//! The data-loss guard: manifest edits that are destructive in other
//! tools (reordering disks or NICs, changing a disk's storage, removing a disk, changing the
//! EFI disk, removing a protected VM) never delete or recreate a volume. Each yields an
//! anomaly or a non-destructive plan, asserted on the simulator's state and request log.

use crate::support::Lab;

const BASE: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: data}\nspec:\n  node: pve01\n  vmid: 150\n  memory: 1GiB\n  cpu: {type: host, cores: 1}\n  options: {protection: true}\n  disks:\n    - {storage: local-lvm, size: 4GiB, interface: scsi0}\n    - {storage: local-lvm, size: 8GiB, interface: scsi1}\n  networks:\n    - {model: virtio, bridge: vmbr0}\n    - {model: virtio, bridge: vmbr1}\n  hardware: {bios: ovmf, efi-disk: {storage: local-lvm, template: 4m}}\n";

/// The volumes a config references (`local-lvm:vm-150-disk-0`), by slot.
fn volumes(config: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    config
        .iter()
        .filter(|(k, _)| k.starts_with("scsi") || k.starts_with("efidisk"))
        .map(|(k, v)| {
            (
                k.clone(),
                v.split(',').next().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn check(edit: &str, manifest: Option<String>, expect_anomaly: bool) {
    let lab = Lab::start().await;
    lab.write("vm/lab/data.yaml", BASE);
    lab.write(
        "vm/lab/other.yaml",
        &crate::support::vm("other", "pve02", 151, "  state: stopped\n"),
    );
    lab.apply().await;
    let before = volumes(&lab.config(150));
    assert_eq!(before.len(), 3, "{before:?}");
    match manifest {
        Some(text) => lab.write("vm/lab/data.yaml", &text),
        None => lab.remove("vm/lab/data.yaml"),
    }
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(
        run.code == 0 || run.code == 3,
        "{edit}: {}\n{}",
        run.stdout,
        run.stderr
    );
    if expect_anomaly {
        assert!(run.stdout.contains("! VM data"), "{edit}: {}", run.stdout);
    }
    let after = lab
        .sim
        .vm_config(150)
        .unwrap_or_else(|| panic!("{edit}: VM 150 was deleted"));
    for (slot, volume) in &before {
        let still = volumes(&after);
        assert!(
            still.iter().any(|(_, v)| v == volume),
            "{edit}: {slot}'s volume {volume} is gone: {still:?}"
        );
    }
    for r in lab.sim.requests().into_iter().filter(|r| r.is_mutating()) {
        assert_ne!(r.method, "DELETE", "{edit}: {} {}", r.method, r.path);
        for (k, v) in &r.params {
            if k == "delete" {
                assert!(
                    !v.split(',')
                        .any(|d| d.starts_with("scsi") || d.starts_with("efidisk")),
                    "{edit}: {} {} deletes {v}",
                    r.method,
                    r.path
                );
            }
            // A write that names a disk slot with a fresh volume would recreate it.
            if k.starts_with("scsi") || k.starts_with("efidisk") {
                panic!("{edit}: {} {} rewrites {k}={v}", r.method, r.path);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn edits_that_destroy_data_elsewhere_never_lose_a_volume_here() {
    let cases: Vec<(&str, Option<String>, bool)> = vec![
        (
            "reorder the disks",
            Some(BASE.replace(
                "    - {storage: local-lvm, size: 4GiB, interface: scsi0}\n    - {storage: local-lvm, size: 8GiB, interface: scsi1}\n",
                "    - {storage: local-lvm, size: 8GiB, interface: scsi1}\n    - {storage: local-lvm, size: 4GiB, interface: scsi0}\n",
            )),
            false,
        ),
        (
            "swap the disks' slots",
            Some(BASE.replace("interface: scsi0}", "interface: scsiX}").replace("interface: scsi1}", "interface: scsi0}").replace("interface: scsiX}", "interface: scsi1}")),
            true,
        ),
        (
            "reorder the NICs",
            Some(BASE.replace(
                "    - {model: virtio, bridge: vmbr0}\n    - {model: virtio, bridge: vmbr1}\n",
                "    - {model: virtio, bridge: vmbr1}\n    - {model: virtio, bridge: vmbr0}\n",
            )),
            false,
        ),
        (
            "move a disk to another storage",
            Some(BASE.replace(
                "{storage: local-lvm, size: 8GiB, interface: scsi1}",
                "{storage: local, size: 8GiB, interface: scsi1}",
            )),
            true,
        ),
        (
            "remove a disk from the manifest",
            Some(BASE.replace(
                "    - {storage: local-lvm, size: 8GiB, interface: scsi1}\n",
                "",
            )),
            false,
        ),
        (
            "change the EFI disk's vars type",
            Some(BASE.replace("template: 4m", "template: 2m")),
            true,
        ),
        (
            "move the EFI disk to another storage",
            Some(BASE.replace(
                "efi-disk: {storage: local-lvm, template: 4m}",
                "efi-disk: {storage: local, template: 4m}",
            )),
            true,
        ),
        ("remove the protected VM's manifest", None, true),
    ];
    for (edit, manifest, anomaly) in cases {
        check(edit, manifest, anomaly).await;
    }
}
