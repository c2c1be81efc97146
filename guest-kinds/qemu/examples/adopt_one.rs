//! Adopt one live VM the way `proxops adopt` does, natively, and print the manifest the VM
//! kind writes and what it could not carry (its gaps):
//!
//!     cargo run -p proxops-kind-qemu --example adopt_one [config.json]
//!
//! `config.json` is a VM's `GET /nodes/{node}/qemu/{vmid}/config` answer (its `data`); without
//! one, a small VM with two disks, a NIC and cloud-init is used. The VM is taken as stopped
//! (no pending changes) on `pve01` as vmid 100; SSH keys match nothing (no SOPS document).

use proxops_kind_qemu::Vm;
use proxops_kind_qemu::secrets::NoSecrets;
use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::model::{Observation, Read};
use serde_json::{Value, json};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config: Value = match std::env::args().nth(1) {
        Some(file) => serde_json::from_str(&std::fs::read_to_string(&file)?)?,
        None => json!({
            "name": "web-01", "memory": "2048", "cores": 2, "cpu": "host", "ostype": "l26",
            "scsihw": "virtio-scsi-single", "boot": "order=scsi0;net0",
            "scsi0": "local-lvm:vm-100-disk-0,iothread=1,size=32G",
            "scsi1": "local-lvm:vm-100-disk-1,size=100G,backup=0",
            "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1",
            "ide2": "local-lvm:vm-100-cloudinit,media=cdrom", "ciuser": "deploy",
            "ipconfig0": "ip=dhcp", "digest": "d1",
        }),
    };
    let entry = json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01",
        "status": "stopped", "template": 0, "name": config["name"], "tags": ""});
    // The reads the kind asks for, each answered as PVE would for a stopped VM.
    let reads = <Vm as ResourceKind>::observe(None, Some(&entry), &[], &[])
        .into_iter()
        .map(|call| {
            let body = if call.path.ends_with("/config") {
                config.clone()
            } else {
                json!([])
            };
            Read {
                call,
                status: 200,
                body: body.to_string(),
            }
        })
        .collect();
    let observed = Observation {
        live: Some(entry.to_string()),
        reads,
    };
    let adopted = <Vm as ResourceKind>::adopt(&observed, &NoSecrets)?;
    println!("{:#}", adopted.manifest);
    for gap in &adopted.gaps {
        println!("gap {}: {}", gap.path, gap.reason);
    }
    Ok(())
}
