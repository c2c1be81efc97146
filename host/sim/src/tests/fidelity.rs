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

/// qemu-server `$check_vm_modify_config_perm`: a key in none of its privilege groups ("catches args, lock,
/// etc.") is root@pam's alone, on create and on update, set or deleted, answered before anything forks. The
/// simulator's token is root@pam's, and a token's auth id (`root@pam!proxops`) is not `root@pam`. An update's
/// `hookscript` is first checked as a snippet (`GuestHelpers::check_hookscript`, a 400); create does not check it.
#[tokio::test]
async fn an_api_token_may_not_write_root_only_keys() {
    let t = T::new().await;
    t.add_volume("pve01", "local:snippets/hook.pl", "snippets", 1024);
    t.create(100, &[]).await;
    let vmgenid = value(&t.config(100).await, "vmgenid");
    let config = format!("{VM}/config");
    let only_root = |key: &str| format!(r#""message":"only root can set '{key}' config\n""#);
    let cases: &[(&str, &str, P<'_>, u16, String)] = &[
        // (method, path, parameters, status, fragment of the answer)
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("args", "-no-reboot")],
            500,
            only_root("args"),
        ),
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("hookscript", "local:snippets/hook.pl")],
            500,
            only_root("hookscript"),
        ),
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("hookscript", "local:snippets/missing.pl")],
            500,
            only_root("hookscript"),
        ),
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("vmgenid", "1")],
            500,
            only_root("vmgenid"),
        ),
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("parallel0", "/dev/parport0")],
            500,
            only_root("parallel0"),
        ),
        (
            "PUT",
            &config,
            &[("args", "-no-reboot")],
            500,
            only_root("args"),
        ),
        (
            "PUT",
            &config,
            &[("hugepages", "2")],
            500,
            only_root("hugepages"),
        ),
        (
            "PUT",
            &config,
            &[("keephugepages", "1")],
            500,
            only_root("keephugepages"),
        ),
        (
            "PUT",
            &config,
            &[("affinity", "0-1")],
            500,
            only_root("affinity"),
        ),
        (
            "PUT",
            &config,
            &[("lock", "backup")],
            500,
            only_root("lock"),
        ),
        (
            "PUT",
            &config,
            &[("arch", "x86_64")],
            500,
            only_root("arch"),
        ),
        (
            "PUT",
            &config,
            &[("ivshmem", "size=32")],
            500,
            only_root("ivshmem"),
        ),
        (
            "PUT",
            &config,
            &[("spice_enhancements", "foldersharing=1")],
            500,
            only_root("spice_enhancements"),
        ),
        (
            "PUT",
            &config,
            &[("amd-sev", "type=std")],
            500,
            only_root("amd-sev"),
        ),
        (
            "PUT",
            &config,
            &[("vmgenid", "1")],
            500,
            only_root("vmgenid"),
        ),
        (
            "POST",
            &config,
            &[("args", "-no-reboot"), ("name", "a")],
            500,
            only_root("args"),
        ),
        (
            "PUT",
            &config,
            &[("delete", "lock")],
            500,
            only_root("lock"),
        ),
        (
            "PUT",
            &config,
            &[("delete", "args")],
            500,
            only_root("args"),
        ),
        (
            "PUT",
            &config,
            &[("hookscript", "local:snippets/hook.pl")],
            500,
            only_root("hookscript"),
        ),
        (
            "PUT",
            &config,
            &[("hookscript", "local:snippets/missing.pl")],
            400,
            r#""hookscript":"script 'local:snippets/missing.pl' does not exist\n""#.to_string(),
        ),
        (
            "PUT",
            &config,
            &[("hookscript", "local:iso/hook.pl")],
            400,
            r#""hookscript":"'local:iso/hook.pl' is not in the snippets directory\n""#.to_string(),
        ),
        (
            "PUT",
            &config,
            &[("hookscript", "nope:snippets/hook.pl")],
            400,
            r#""hookscript":"storage 'nope' does not exist\n""#.to_string(),
        ),
        // Keys in a privilege group pass.
        (
            "PUT",
            &config,
            &[
                ("name", "a"),
                ("numa0", "cpus=0,memory=512"),
                ("ipconfig0", "ip=dhcp"),
                ("tags", "a"),
                ("freeze", "1"),
            ],
            200,
            "null".to_string(),
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    // Nothing was written: no VM 101, and VM 100 has none of the keys.
    t.check(
        "GET",
        "/nodes/pve01/qemu/101/config",
        &[],
        500,
        "does not exist",
    )
    .await;
    let after = t.config(100).await;
    for key in [
        "args",
        "hugepages",
        "affinity",
        "lock",
        "hookscript",
        "parallel0",
    ] {
        assert_eq!(value(&after, key), None, "{key}: {after}");
    }
    assert_eq!(value(&after, "vmgenid"), vmgenid, "{after}");
    assert_eq!(value(&after, "name").as_deref(), Some("a"), "{after}");
}

/// The device checks qemu-server makes by value: a serial port other than a `socket`, a USB host device (not
/// `spice`) and a raw PCI device are root@pam's. `create_vm` checks them before it forks (`only root can set`);
/// `update_vm_api` under the config lock, in its worker for `POST` (the task fails), for the old value as well
/// (`only root can modify` / `only root can delete` a real serial port).
#[tokio::test]
async fn an_api_token_may_attach_only_virtual_devices() {
    let create = "/nodes/pve01/qemu";
    let config = format!("{VM}/config");
    // (a device already on VM 100, as root@pam set it; method; path; parameters; status; fragment of the
    // answer, or for `POST .../config` the task's exit status)
    type Case<'a> = (
        Option<(&'a str, &'a str)>,
        &'a str,
        &'a str,
        P<'a>,
        u16,
        &'a str,
    );
    let cases: &[Case<'_>] = &[
        (
            None,
            "POST",
            create,
            &[("vmid", "101"), ("serial0", "/dev/ttyS0")],
            500,
            r#""message":"only root can set 'serial0' config for real devices\n""#,
        ),
        (
            None,
            "POST",
            create,
            &[("vmid", "101"), ("usb0", "host=1234:5678")],
            500,
            r#""message":"only root can set 'usb0' config for real devices\n""#,
        ),
        (
            None,
            "POST",
            create,
            &[("vmid", "101"), ("usb0", "usb3=1")],
            500,
            r#""message":"either 'host' or 'mapping' must be set.\n""#,
        ),
        (
            None,
            "POST",
            create,
            &[
                ("vmid", "101"),
                ("serial0", "socket"),
                ("usb0", "spice"),
                ("usb1", "mapping=stick"),
            ],
            200,
            "UPID:",
        ),
        (
            None,
            "PUT",
            &config,
            &[("serial0", "/dev/ttyS0")],
            500,
            r#""message":"only root can modify 'serial0' config for real devices\n""#,
        ),
        (
            None,
            "POST",
            &config,
            &[("serial0", "/dev/ttyS0")],
            200,
            "only root can modify 'serial0' config for real devices",
        ),
        (
            None,
            "POST",
            &config,
            &[("usb0", "host=1-2")],
            200,
            "only root can set 'usb0' config for real devices",
        ),
        (
            None,
            "POST",
            &config,
            &[("hostpci0", "0000:01:00.0")],
            200,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
        (
            None,
            "POST",
            &config,
            &[("hostpci0", "mapping=gpu,romfile=x.rom")],
            200,
            "400 Parameter verification failed. hostpci0: only root@pam can set 'romfile' option",
        ),
        (
            None,
            "POST",
            &config,
            &[
                ("serial0", "socket"),
                ("usb0", "spice"),
                ("hostpci0", "mapping=gpu"),
            ],
            200,
            "OK",
        ),
        (
            Some(("serial0", "/dev/ttyS0")),
            "PUT",
            &config,
            &[("serial0", "socket")],
            500,
            "only root can modify 'serial0' config for real devices",
        ),
        (
            Some(("serial0", "/dev/ttyS0")),
            "PUT",
            &config,
            &[("delete", "serial0")],
            500,
            "only root can delete 'serial0' config for real devices",
        ),
        (
            Some(("serial0", "socket")),
            "PUT",
            &config,
            &[("delete", "serial0")],
            200,
            "null",
        ),
        (
            Some(("usb0", "host=1234:5678")),
            "PUT",
            &config,
            &[("usb0", "spice")],
            500,
            "only root can set 'usb0' config for real devices",
        ),
        (
            Some(("usb0", "host=1234:5678")),
            "POST",
            &config,
            &[("delete", "usb0")],
            200,
            "only root can set 'usb0' config for real devices",
        ),
        (
            Some(("hostpci0", "0000:01:00.0")),
            "PUT",
            &config,
            &[("hostpci0", "mapping=gpu")],
            500,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
        (
            Some(("hostpci0", "0000:01:00.0")),
            "PUT",
            &config,
            &[("delete", "hostpci0")],
            500,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
    ];
    for (seed, method, path, params, status, fragment) in cases {
        let t = T::new().await;
        t.create(100, &[]).await;
        if let Some((key, value)) = seed {
            let mut st = t.sim.sim.write();
            let vm = st.vms.get_mut(&100).expect("VM 100");
            vm.conf.insert(key.to_string(), value.to_string());
        }
        let before = t.config(100).await;
        if *method == "POST" && *path == config {
            let exit = t.task(method, path, params).await;
            assert_eq!(exit, *fragment, "{seed:?} {params:?}");
        } else {
            t.check(method, path, params, *status, fragment).await;
        }
        let after = t.config(100).await;
        let unchanged = |k: &str| value(&after, k) == value(&before, k);
        if *status != 200 || !["OK", "null", "UPID:"].contains(fragment) {
            assert!(
                ["serial0", "usb0", "usb1", "hostpci0"]
                    .into_iter()
                    .all(unchanged),
                "{seed:?} {params:?}: {before} -> {after}"
            );
        }
    }
}

/// The power checks qemu-server makes before it forks: a graceful shutdown or a reboot of a paused VM
/// (`vm_is_paused`; `forceStop` stops it instead), and a reboot of a VM that is not running (`vm_reboot`).
#[tokio::test]
async fn paused_or_stopped_vms_refuse_shutdown_and_reboot() {
    let cases: &[(&str, &str, P<'_>, u16, &str, &str)] = &[
        // (state before, endpoint, parameters, status, fragment of the answer, qmpstatus after)
        (
            "paused",
            "shutdown",
            &[],
            500,
            r#""message":"VM is paused - cannot shutdown\n""#,
            "paused",
        ),
        (
            "paused",
            "reboot",
            &[],
            500,
            r#""message":"VM is paused - cannot shutdown\n""#,
            "paused",
        ),
        (
            "stopped",
            "reboot",
            &[],
            500,
            r#""message":"VM 100 not running\n""#,
            "stopped",
        ),
        (
            "paused",
            "shutdown",
            &[("forceStop", "1")],
            200,
            "OK",
            "stopped",
        ),
        ("paused", "stop", &[], 200, "OK", "stopped"),
        ("running", "reboot", &[], 200, "OK", "running"),
        ("stopped", "shutdown", &[], 200, "OK", "stopped"),
    ];
    for (state, endpoint, params, status, fragment, after) in cases {
        let t = T::new().await;
        t.create(100, &[]).await;
        if *state != "stopped" {
            assert_eq!(
                t.task("POST", &format!("{VM}/status/start"), &[]).await,
                "OK"
            );
        }
        if *state == "paused" {
            assert_eq!(
                t.task("POST", &format!("{VM}/status/suspend"), &[]).await,
                "OK"
            );
        }
        let path = format!("{VM}/status/{endpoint}");
        if *status == 200 {
            assert_eq!(
                t.task("POST", &path, params).await,
                *fragment,
                "{state} {endpoint}"
            );
        } else {
            t.check("POST", &path, params, *status, fragment).await;
        }
        let current = t.get(&format!("{VM}/status/current"), &[]).await;
        assert_eq!(
            current["qmpstatus"], *after,
            "{state} {endpoint} {params:?}: {current}"
        );
    }
}

/// `vm_reboot` in the worker: a VM that stopped while the reboot waited for its lock is left stopped, and the
/// task ends OK ("only reboot if running, as qmeventd starts it again on a stop event").
#[tokio::test]
async fn a_reboot_of_a_vm_that_stopped_meanwhile_ends_quietly() {
    let t = T::new().await;
    t.create(100, &[]).await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    let flock = t.hold_flock(100, false);
    let upid = t.upid("POST", &format!("{VM}/status/reboot"), &[]).await;
    t.until_flock_waiters(1).await;
    t.sim.sim.write().vms.get_mut(&100).expect("VM 100").running = false;
    drop(flock);
    assert_eq!(t.wait(&upid).await, "OK");
    let current = t.get(&format!("{VM}/status/current"), &[]).await;
    assert_eq!(current["status"], "stopped", "{current}");
}

/// `background_delay` on `POST .../config` (qemu-server `update_vm_api`) and `delay` on a volume delete
/// (pve-storage `Content.pm`): PVE waits that long for the task and answers `null` when it ended OK, a 500 with the
/// task's error when it failed (`failed to update VM <vmid>: ...` for the config), the UPID when it still runs.
#[tokio::test]
async fn a_delayed_answer_reports_a_failed_task() {
    let volume = format!(
        "/nodes/pve01/storage/local/content/{}",
        super::enc("local:iso/x.iso")
    );
    let config = format!("{VM}/config");
    let boom = crate::FaultRule {
        method: "DELETE".into(),
        path: "/nodes/{node}/storage/{storage}/content/{volume}".into(),
        kind: crate::FaultKind::FailTask {
            message: "boom".into(),
        },
        probability: None,
        times: Some(1),
    };
    // (fault, method, path, parameters, status, fragment of the answer, name and volume after)
    type Case<'a> = (
        Option<&'a crate::FaultRule>,
        &'a str,
        &'a str,
        P<'a>,
        u16,
        &'a str,
        Option<&'a str>,
        bool,
    );
    let cases: &[Case<'_>] = &[
        (
            None,
            "POST",
            &config,
            &[("name", "a"), ("background_delay", "5")],
            200,
            r#"{"data":null}"#,
            Some("a"),
            true,
        ),
        (
            None,
            "POST",
            &config,
            &[
                ("ide2", "local-lvm:cloudinit"),
                ("name", "a"),
                ("background_delay", "5"),
            ],
            500,
            r#""message":"failed to update VM 100: Logical Volume vm-100-cloudinit already exists\n""#,
            None,
            true,
        ),
        (
            None,
            "POST",
            &config,
            &[("serial0", "/dev/ttyS0"), ("background_delay", "5")],
            500,
            r#""message":"failed to update VM 100: only root can modify 'serial0' config for real devices\n""#,
            None,
            true,
        ),
        (
            Some(&boom),
            "DELETE",
            &volume,
            &[("delay", "5")],
            500,
            r#""message":"boom\n""#,
            None,
            true,
        ),
        (
            None,
            "DELETE",
            &volume,
            &[("delay", "5")],
            200,
            r#"{"data":null}"#,
            None,
            false,
        ),
    ];
    for (fault, method, path, params, status, fragment, name, kept) in cases {
        let t = T::new().await;
        t.create(100, &[("ide2", "local-lvm:cloudinit")]).await;
        t.add_volume("pve01", "local:iso/x.iso", "iso", 1024);
        if let Some(rule) = fault {
            t.sim.set_faults(vec![(*rule).clone()]);
        }
        t.check(method, path, params, *status, fragment).await;
        assert_eq!(
            value(&t.config(100).await, "name").as_deref(),
            *name,
            "{params:?}"
        );
        let content = t.get("/nodes/pve01/storage/local/content", &[]).await;
        let has = content
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["volid"] == "local:iso/x.iso");
        assert_eq!(has, *kept, "{params:?}: {content}");
    }
    // A task still running when the delay is over: its UPID.
    let t = T::new().await;
    t.create(100, &[]).await;
    let flock = t.hold_flock(100, false);
    t.check(
        "POST",
        &config,
        &[("name", "b"), ("background_delay", "1")],
        200,
        ":qmconfig:100:",
    )
    .await;
    drop(flock);
}

/// qemu-server `clone_vm` (`$load_and_check`, before it forks): a full clone of a running VM cannot copy its TPM
/// state; a stopped one can, and a running VM without TPM state clones.
#[tokio::test]
async fn a_running_vm_with_tpm_state_does_not_clone() {
    let cases: &[(&str, bool, u16, &str)] = &[
        // (TPM state at create, running, status, fragment of the answer)
        (
            "local-lvm:1,version=v2.0",
            true,
            500,
            r#""message":"cannot clone TPM state while VM is running\n""#,
        ),
        ("local-lvm:1,version=v2.0", false, 200, "OK"),
        ("", true, 200, "OK"),
    ];
    for (tpm, running, status, fragment) in cases {
        let t = T::new().await;
        let mut create: Vec<(&str, &str)> = vec![("scsi0", "local-lvm:1")];
        if !tpm.is_empty() {
            create.push(("tpmstate0", tpm));
        }
        t.create(100, &create).await;
        if *running {
            assert_eq!(
                t.task("POST", &format!("{VM}/status/start"), &[]).await,
                "OK"
            );
        }
        let clone = [("newid", "101"), ("full", "1")];
        let path = format!("{VM}/clone");
        if *status == 200 {
            assert_eq!(
                t.task("POST", &path, &clone).await,
                *fragment,
                "tpm={tpm:?} running={running}"
            );
        } else {
            t.check("POST", &path, &clone, *status, fragment).await;
        }
        // A refused clone leaves no placeholder for VM 101.
        let (code, _) = t.req("GET", "/nodes/pve01/qemu/101/config", &[]).await;
        assert_eq!(code == 200, *status == 200, "tpm={tpm:?} running={running}");
    }
}

/// pve-common's `check_object` (9.0.8 and later, commit 0f0e791): a parameter whose schema `requires` another
/// that is missing reports the missing one, `missing property required by '<parameter>'`.
#[tokio::test]
async fn a_missing_dependency_is_reported_on_the_missing_parameter() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let cases: &[(&str, &str, P<'_>, &str)] = &[
        // (method, path, parameters, the errors object PVE answers)
        (
            "PUT",
            "/nodes/pve01/qemu/100/config",
            &[("force", "1"), ("name", "a")],
            r#"{"delete":"missing property required by 'force'"}"#,
        ),
        (
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "101"), ("unique", "1")],
            r#"{"archive":"missing property required by 'unique'"}"#,
        ),
        (
            "POST",
            "/nodes/pve01/qemu/100/status/suspend",
            &[("statestorage", "local-lvm")],
            r#"{"todisk":"missing property required by 'statestorage'"}"#,
        ),
        (
            "POST",
            "/nodes/pve01/storage/local/download-url",
            &[
                ("url", "http://127.0.0.1:1/a.iso"),
                ("content", "iso"),
                ("filename", "a.iso"),
                ("checksum-algorithm", "sha256"),
            ],
            r#"{"checksum":"missing property required by 'checksum-algorithm'"}"#,
        ),
    ];
    for (method, path, params, errors) in cases {
        let (status, body) = t.req(method, path, params).await;
        assert_eq!(status, 400, "{method} {path} {params:?}: {body}");
        assert_eq!(
            body["errors"].to_string(),
            *errors,
            "{method} {path} {params:?}"
        );
    }
    assert_eq!(value(&t.config(100).await, "name"), None);
}

/// qemu-server `parse_net`/`print_net` keep a given MAC address as written, on create and on update; only a
/// generated one is PVE's upper case (`random_ether_addr`).
#[tokio::test]
async fn a_given_mac_address_is_stored_as_written() {
    let cases: &[(&str, &str)] = &[
        // (netN as sent, as stored; `*` stands for the generated part)
        (
            "virtio=bc:24:11:aa:bb:cc,bridge=vmbr0",
            "virtio=bc:24:11:aa:bb:cc,bridge=vmbr0",
        ),
        (
            "e1000=BC:24:11:AA:BB:CC,bridge=vmbr0",
            "e1000=BC:24:11:AA:BB:CC,bridge=vmbr0",
        ),
        (
            "virtio=Bc:24:11:aA:bb:Cc,bridge=vmbr0,tag=5",
            "virtio=Bc:24:11:aA:bb:Cc,bridge=vmbr0,tag=5",
        ),
        (
            "model=virtio,macaddr=02:00:00:ab:cd:ef,bridge=vmbr0",
            "virtio=02:00:00:ab:cd:ef,bridge=vmbr0",
        ),
        ("virtio,bridge=vmbr0", "virtio=BC:24:11:*,bridge=vmbr0"),
    ];
    for (sent, stored) in cases {
        let t = T::new().await;
        t.create(100, &[("net0", sent)]).await;
        t.check(
            "PUT",
            &format!("{VM}/config"),
            &[("net1", sent)],
            200,
            "null",
        )
        .await;
        let config = t.config(100).await;
        for key in ["net0", "net1"] {
            let got = value(&config, key).unwrap_or_default();
            let (head, tail) = stored.split_once('*').unwrap_or((stored, ""));
            let generated = stored.contains('*');
            let fits = if generated {
                got.starts_with(head)
                    && got.ends_with(tail)
                    && got[head.len()..got.len() - tail.len()]
                        .bytes()
                        .all(|b| b == b':' || b.is_ascii_digit() || b.is_ascii_uppercase())
            } else {
                got == *stored
            };
            assert!(fits, "{key}={sent:?}: stored {got:?}, expected {stored:?}");
        }
    }
}
