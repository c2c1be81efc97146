//! Rules qemu-server 9.2.6 applies that real clients (proxmoxer, Ansible's community.proxmox) run into: what a
//! config write keeps, which keys only root@pam may write, what the power, config and clone endpoints refuse
//! before they fork a task, and how PVE stores what it is given.

use serde_json::Value;

use super::{P, T};

const VM: &str = "/nodes/pve01/qemu/100";

/// The value of `key` in a config answer, `None` when absent.
fn value(config: &Value, key: &str) -> Option<String> {
    config.get(key).map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// qemu-server `update_vm_api`: only a request that sets a boot `order=` removes the legacy `bootdisk`
/// ("remove legacy boot order settings if new one set"), as a delete that waits on a running VM; any
/// other write keeps it.
#[tokio::test]
async fn bootdisk_goes_only_with_a_new_boot_order() {
    type Case<'a> = (&'a str, bool, P<'a>, Option<&'a str>, Option<&'a str>);
    let cases: &[Case<'_>] = &[
        // (boot at create, running, request, bootdisk in the current config, bootdisk with pending applied)
        ("cdn", false, &[("tags", "a")], Some("scsi0"), Some("scsi0")),
        (
            "order=scsi0",
            false,
            &[("tags", "a")],
            Some("scsi0"),
            Some("scsi0"),
        ),
        (
            "cdn",
            false,
            &[("boot", "dc")],
            Some("scsi0"),
            Some("scsi0"),
        ),
        ("cdn", false, &[("boot", "order=scsi0")], None, None),
        ("cdn", true, &[("name", "a")], Some("scsi0"), Some("scsi0")),
        ("cdn", true, &[("boot", "order=scsi0")], Some("scsi0"), None),
    ];
    for (boot, running, set, current, merged) in cases {
        let t = T::new().await;
        t.create(
            100,
            &[
                ("scsi0", "local-lvm:1"),
                ("boot", boot),
                ("bootdisk", "scsi0"),
            ],
        )
        .await;
        if *running {
            assert_eq!(
                t.task("POST", &format!("{VM}/status/start"), &[]).await,
                "OK"
            );
        }
        t.check("PUT", &format!("{VM}/config"), set, 200, "null")
            .await;
        let now = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
        assert_eq!(
            value(&now, "bootdisk").as_deref(),
            *current,
            "boot={boot} running={running} {set:?}: {now}"
        );
        let after = t.config(100).await;
        assert_eq!(
            value(&after, "bootdisk").as_deref(),
            *merged,
            "boot={boot} running={running} {set:?}: {after}"
        );
    }
}
