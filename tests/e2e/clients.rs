//! Real PVE clients against `proxops sim serve`: proxmoxer (Python, what Ansible's
//! community.proxmox is built on) drives a VM's life (create, config, power, resize, clone,
//! delete, refusals), and Ansible's community.proxmox modules converge a cluster twice (the
//! second run changes nothing), then power it down and remove what they made; each test then
//! checks the simulator's own state.
//!
//! Without python3 and proxmoxer (or ansible-playbook with community.proxmox) a test is
//! skipped with a note, except in CI (`CI=true`, as .ci/run runs, which installs them) or with
//! PROXOPS_REQUIRE_CLIENTS=1, where it fails.

const INSTALL: &str = "install it with `pip install proxmoxer==2.3.0 requests`";
const INSTALL_ANSIBLE: &str = "install it with `pip install ansible==12.3.0 proxmoxer==2.3.0 requests` (community.proxmox 1.4.0)";
const SECRET: &str = "0c0ffee0-1111-2222-3333-444444444444";

/// Whether a missing client fails the test instead of skipping it.
fn clients_required() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
        || std::env::var("PROXOPS_REQUIRE_CLIENTS").as_deref() == Ok("1")
}

/// Whether python3 can import proxmoxer; `false` (skip) when not, outside CI.
fn have_proxmoxer() -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import proxmoxer, requests"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || !clients_required(),
        "python3 cannot import proxmoxer: {INSTALL}"
    );
    if !found {
        eprintln!("skipping the proxmoxer test: python3 cannot import proxmoxer; {INSTALL}");
    }
    found
}

/// Why ansible-playbook cannot run community.proxmox modules, if it cannot: it is missing, the
/// collection is missing, or the Python it runs on cannot import proxmoxer (the modules need it).
fn ansible_missing() -> Option<String> {
    let version = std::process::Command::new("ansible-playbook")
        .arg("--version")
        .output();
    let Ok(version) = version.map(|o| String::from_utf8_lossy(&o.stdout).to_string()) else {
        return Some("ansible-playbook is not on PATH".into());
    };
    let collections = std::process::Command::new("ansible-galaxy")
        .args(["collection", "list", "community.proxmox"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    if !collections.contains("community.proxmox") {
        return Some("the community.proxmox collection is not installed".into());
    }
    // `  python version = 3.11.7 (main, ...) [GCC 12.2.0] (/usr/bin/python3)`
    let python = version
        .lines()
        .find(|l| l.trim_start().starts_with("python version ="))
        .and_then(|l| l.trim_end().strip_suffix(')'))
        .and_then(|l| l.rsplit_once('(').map(|(_, p)| p.to_string()))
        .unwrap_or_else(|| "python3".into());
    let imports = std::process::Command::new(&python)
        .args(["-c", "import proxmoxer, requests"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        return Some(format!(
            "{python} (Ansible's Python) cannot import proxmoxer"
        ));
    }
    None
}

/// Whether Ansible can run community.proxmox; `false` (skip) when not, outside CI.
fn have_ansible() -> bool {
    let missing = ansible_missing();
    if let Some(why) = &missing {
        assert!(!clients_required(), "{why}: {INSTALL_ANSIBLE}");
        eprintln!("skipping the Ansible test: {why}; {INSTALL_ANSIBLE}");
    }
    missing.is_none()
}

/// A `proxops sim serve` child (killed on drop) with a fixed token `root@pam!<token_id>`.
struct Served {
    _child: tokio::process::Child,
    port: String,
    client: proxops_pve::Client,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(token_id: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("sim.json");
        let sim = crate::support::sim_child(
            token_id,
            SECRET,
            &["--nodes", "pve01,pve02", "--state", state.to_str().unwrap()],
        )
        .await;
        Served {
            _child: sim.child,
            port: sim.url.rsplit(':').next().unwrap().to_string(),
            client: sim.client,
            _dir: dir,
        }
    }

    /// The vmids of node pve01's VMs, sorted.
    async fn vmids(&self) -> Vec<u64> {
        let guests = self.client.get("/nodes/pve01/qemu", &[]).await.unwrap();
        let mut vmids: Vec<u64> = guests
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["vmid"].as_u64().unwrap())
            .collect();
        vmids.sort_unstable();
        vmids
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn proxmoxer_drives_a_vm_through_its_life() {
    if !have_proxmoxer() {
        return;
    }
    let sim = Served::start("client").await;

    let flow = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/e2e/clients/proxmoxer_flow.py"
    );
    let run = tokio::process::Command::new("python3")
        .arg(flow)
        .args(["127.0.0.1", &sim.port, "client", SECRET])
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "ok", "{stderr}");

    // The simulator's own view: the clone is the only guest left, with the source's config
    // as proxmoxer wrote it and the grown disk.
    assert_eq!(sim.vmids().await, [101]);
    let config = sim
        .client
        .get("/nodes/pve01/qemu/101/config", &[])
        .await
        .unwrap();
    assert_eq!(config["name"], "web-copy", "{config}");
    assert_eq!(config["memory"], "2048", "{config}");
    assert_eq!(config["description"], "set by proxmoxer", "{config}");
    let disk = config["scsi0"].as_str().unwrap();
    assert!(
        disk.starts_with("local-lvm:vm-101-disk-0") && disk.ends_with("size=5G"),
        "{disk}"
    );
}

/// A QEMU guest created on `pve01` with `params` (`vmid`, optionally `name`), as a human
/// would before the playbook runs.
async fn create_guest(sim: &Served, params: &[(&str, &str)]) {
    let params: Vec<proxops_pve::Param> = params
        .iter()
        .map(|&(k, v)| proxops_pve::Param::new(k, v))
        .collect();
    sim.client
        .request(
            proxops_pve::Method::Post,
            "/nodes/pve01/qemu",
            &params,
            false,
        )
        .await
        .unwrap();
}

/// Playbook `name` changes `changes` things on its first run and nothing on its second.
async fn converges(sim: &Served, name: &str, changes: u64, temp: &std::path::Path) {
    assert_eq!(playbook(sim, name, true, temp).await, changes, "{name}");
    assert_eq!(playbook(sim, name, false, temp).await, 0, "{name}, again");
}

/// One `ansible-playbook` run of a playbook in tests/e2e/clients/ against `sim`; returns the
/// recap's `changed=` count after checking that nothing failed.
async fn playbook(sim: &Served, name: &str, first: bool, temp: &std::path::Path) -> u64 {
    let path = format!(
        "{}/../../tests/e2e/clients/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let vars = serde_json::json!({
        "api_port": sim.port.parse::<u16>().unwrap(),
        "token_id": "ansible",
        "token_secret": SECRET,
        "first": first,
    });
    let run = tokio::process::Command::new("ansible-playbook")
        .args(["-i", "localhost,", "-c", "local", &path, "-e"])
        .arg(vars.to_string())
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", temp)
        .env("ANSIBLE_REMOTE_TEMP", temp)
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    let context = format!("{name} (first run: {first}):\n{stdout}\n{stderr}");
    assert!(run.status.success(), "{context}");
    // `localhost : ok=48 changed=12 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0`
    let recap = stdout
        .lines()
        .rfind(|l| l.starts_with("localhost") && l.contains(" ok="))
        .unwrap_or_else(|| panic!("no play recap in {context}"));
    let count = |key: &str| -> u64 {
        recap
            .split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {recap}"))
    };
    assert_eq!(count("failed="), 0, "{context}");
    assert_eq!(count("unreachable="), 0, "{context}");
    count("changed=")
}

#[tokio::test(flavor = "multi_thread")]
async fn ansible_converges_vms_and_changes_nothing_the_second_time() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();

    // The desired state: each playbook asserts per task that it changed on the first run only.
    let converge = "ansible_converge.yml";
    converges(&sim, converge, 12, temp.path()).await;
    assert_eq!(sim.vmids().await, [100, 102, 200, 201]);
    // The boot disk's new options wait for the next start, as on PVE.
    let pending = sim
        .client
        .get("/nodes/pve01/qemu/100/pending", &[])
        .await
        .unwrap();
    let scsi0 = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "scsi0")
        .unwrap();
    assert_eq!(
        scsi0["value"], "local-lvm:vm-100-disk-0,size=4G,ssd=1",
        "{scsi0}"
    );
    assert_eq!(
        scsi0["pending"], "local-lvm:vm-100-disk-0,discard=on,iothread=1,size=4G,ssd=1",
        "{scsi0}"
    );

    // Power and removals; the second run changes only `update: true`, which always reports a change.
    let teardown = "ansible_teardown.yml";
    assert_eq!(playbook(&sim, teardown, true, temp.path()).await, 6);
    assert_eq!(playbook(&sim, teardown, false, temp.path()).await, 1);

    // The simulator's own view: the VM as the modules left it (the reboot applied what was
    // pending), the template, and no volume of the removed disk or guests.
    assert_eq!(sim.vmids().await, [100, 200]);
    let config = sim
        .client
        .get("/nodes/pve01/qemu/100/config", &[])
        .await
        .unwrap();
    assert_eq!(config["memory"], "2048", "{config}");
    assert_eq!(config["description"], "updated by ansible", "{config}");
    assert_eq!(config["cores"], 2, "{config}");
    assert_eq!(config["tags"], "ansible;web", "{config}");
    assert_eq!(
        config["scsi0"], "local-lvm:vm-100-disk-0,discard=on,iothread=1,size=4G,ssd=1",
        "{config}"
    );
    let net0 = config["net0"].as_str().unwrap();
    assert!(
        net0.starts_with("virtio=BC:24:11:") && net0.ends_with(",bridge=vmbr0,tag=10"),
        "{net0}"
    );
    let net1 = config["net1"].as_str().unwrap();
    assert!(net1.ends_with(",bridge=vmbr0,firewall=1,tag=20"), "{net1}");
    for gone in ["scsi1", "unused0", "net2"] {
        assert!(config.get(gone).is_none(), "{gone}: {config}");
    }
    let status = sim
        .client
        .get("/nodes/pve01/qemu/100/status/current", &[])
        .await
        .unwrap();
    assert_eq!(status["status"], "stopped", "{status}");
    let template = sim
        .client
        .get("/nodes/pve01/qemu/200/config", &[])
        .await
        .unwrap();
    assert_eq!(template["template"], 1, "{template}");
    let content = sim
        .client
        .get("/nodes/pve01/storage/local-lvm/content", &[])
        .await
        .unwrap();
    let volids: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(
        volids,
        ["local-lvm:base-200-disk-0", "local-lvm:vm-100-disk-0"]
    );
}

/// Ansible's HA modules (`proxmox_cluster_ha_resources`, `proxmox_cluster_ha_rules`) against
/// the simulator's HA manager: create, converge, remove, each idempotent.
#[tokio::test(flavor = "multi_thread")]
async fn ansible_manages_ha_resources_and_rules() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();
    create_guest(&sim, &[("vmid", "300")]).await;

    let ha = "ansible_ha.yml";
    converges(&sim, ha, 2, temp.path()).await;
    // The simulator's own view: the resource as the module wrote it, HA keeping the VM
    // stopped, and the rule.
    let resource = sim
        .client
        .get("/cluster/ha/resources/vm%3A300", &[])
        .await
        .unwrap();
    assert_eq!(resource["state"], "stopped", "{resource}");
    assert_eq!(resource["max_restart"], 2, "{resource}");
    assert_eq!(resource["comment"], "managed by ansible", "{resource}");
    let rules = sim.client.get("/cluster/ha/rules", &[]).await.unwrap();
    let rule = &rules.as_array().unwrap()[0];
    assert_eq!(rule["rule"], "prefer-pve02", "{rules}");
    assert_eq!(rule["resources"], "vm:300", "{rules}");
    let listing = sim.client.get("/cluster/resources", &[]).await.unwrap();
    let vm = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 300)
        .unwrap();
    assert!(
        vm["hastate"].is_string(),
        "an HA-managed entry shows its hastate: {vm}"
    );

    let teardown = "ansible_ha_teardown.yml";
    converges(&sim, teardown, 2, temp.path()).await;
    let resources = sim.client.get("/cluster/ha/resources", &[]).await.unwrap();
    assert_eq!(resources, serde_json::json!([]));
}

/// Ansible's pool modules (`proxmox_pool`, `proxmox_pool_member`) against the simulator's
/// `/pools`: a pool, guests by vmid and by name, a storage, then all out and the pool gone,
/// each idempotent.
#[tokio::test(flavor = "multi_thread")]
async fn ansible_manages_pools_and_their_members() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();
    for (vmid, name) in [("300", "web300"), ("301", "web301")] {
        create_guest(&sim, &[("vmid", vmid), ("name", name)]).await;
    }

    let pools = "ansible_pools.yml";
    converges(&sim, pools, 4, temp.path()).await;
    // The simulator's own view: the pool, its comment and members, and the guests' `pool`.
    let info = sim
        .client
        .get(
            "/pools",
            &[proxops_pve::Param::new("poolid", "ansible-web")],
        )
        .await
        .unwrap();
    assert_eq!(info[0]["comment"], "made by ansible", "{info}");
    let members: Vec<String> = info[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        members,
        ["qemu/300", "qemu/301", "storage/pve01/local-lvm"],
        "{info}"
    );
    let listing = sim.client.get("/cluster/resources", &[]).await.unwrap();
    let vm = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 301)
        .unwrap();
    assert_eq!(vm["pool"], "ansible-web", "{vm}");

    let teardown = "ansible_pools_teardown.yml";
    converges(&sim, teardown, 3, temp.path()).await;
    let delete = "ansible_pools_delete.yml";
    converges(&sim, delete, 1, temp.path()).await;
    let pools = sim.client.get("/pools", &[]).await.unwrap();
    assert_eq!(pools, serde_json::json!([]));
}

/// Ansible's `proxmox_backup_schedule` against the simulator's `/cluster/backup`: it reads the
/// job (`GET /cluster/backup/{id}`, the listing) and rewrites its `vmid` list with `PUT`.
#[tokio::test(flavor = "multi_thread")]
async fn ansible_edits_a_backup_jobs_guests() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();
    for (vmid, name) in [("300", "web300"), ("301", "web301")] {
        create_guest(&sim, &[("vmid", vmid), ("name", name)]).await;
    }
    sim.client
        .request(
            proxops_pve::Method::Post,
            "/cluster/backup",
            &[
                proxops_pve::Param::new("id", "nightly"),
                proxops_pve::Param::new("schedule", "mon..fri 21:00"),
                proxops_pve::Param::new("storage", "local"),
                proxops_pve::Param::new("vmid", "300,200"),
            ],
            false,
        )
        .await
        .unwrap();

    let backup = "ansible_backup.yml";
    converges(&sim, backup, 2, temp.path()).await;
    let job = sim
        .client
        .get("/cluster/backup/nightly", &[])
        .await
        .unwrap();
    assert_eq!(job["vmid"], "200,301", "{job}");
    assert_eq!(job["schedule"], "mon..fri 21:00", "{job}");
    assert_eq!(job["enabled"], 1, "{job}");
}

/// Ansible's `proxmox_firewall` against the simulator's firewall: a security group and its
/// rule, a VM's rules in order (created at position 0 and moved, as PVE makes every client do)
/// and an alias, each idempotent.
#[tokio::test(flavor = "multi_thread")]
async fn ansible_manages_a_vms_firewall_and_a_security_group() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();
    create_guest(&sim, &[("vmid", "300")]).await;
    let firewall = "ansible_firewall.yml";
    converges(&sim, firewall, 4, temp.path()).await;
    let comments = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["comment"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let rules = sim
        .client
        .get("/nodes/pve01/qemu/300/firewall/rules", &[])
        .await
        .unwrap();
    assert_eq!(comments(&rules), ["ssh", "telnet", "tier"], "{rules}");
    assert_eq!(rules[2]["action"], "webtier", "{rules}");
    let group = sim
        .client
        .get("/cluster/firewall/groups/webtier", &[])
        .await
        .unwrap();
    assert_eq!(comments(&group), ["http"], "{group}");
    let groups = sim
        .client
        .get("/cluster/firewall/groups", &[])
        .await
        .unwrap();
    assert_eq!(groups[0]["comment"], "web tier", "{groups}");
    let aliases = sim
        .client
        .get("/nodes/pve01/qemu/300/firewall/aliases", &[])
        .await
        .unwrap();
    assert_eq!(aliases[0]["cidr"], "192.0.2.0/24", "{aliases}");
}

/// Ansible's access modules (`proxmox_group`, `proxmox_user`, `proxmox_access_acl`) against
/// the simulator's `/access`: a group, a user in it, an ACL entry for the group, each
/// idempotent, checked in the simulator's own listings, then all removed.
#[tokio::test(flavor = "multi_thread")]
async fn ansible_manages_users_groups_and_acl_entries() {
    if !have_ansible() {
        return;
    }
    let sim = Served::start("ansible").await;
    let temp = tempfile::tempdir().unwrap();
    let access = "ansible_access.yml";
    converges(&sim, access, 3, temp.path()).await;

    let user = sim
        .client
        .get("/access/users/alice@pve", &[])
        .await
        .unwrap();
    assert_eq!(user["comment"], "an operator", "{user}");
    assert_eq!(user["email"], "alice@example.com", "{user}");
    assert_eq!(user["groups"], serde_json::json!(["ansible-ops"]), "{user}");
    let acl = sim.client.get("/access/acl", &[]).await.unwrap();
    let entry = acl
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ugid"] == "ansible-ops")
        .unwrap_or_else(|| panic!("no ACL entry for the group: {acl}"));
    assert_eq!(
        (&entry["path"], &entry["roleid"], &entry["type"]),
        (
            &serde_json::json!("/vms"),
            &serde_json::json!("PVEVMUser"),
            &serde_json::json!("group")
        ),
        "{entry}"
    );

    let teardown = "ansible_access_teardown.yml";
    converges(&sim, teardown, 3, temp.path()).await;
    let users = sim.client.get("/access/users", &[]).await.unwrap();
    assert!(
        !users.to_string().contains("alice@pve"),
        "the user is gone: {users}"
    );
    let groups = sim.client.get("/access/groups", &[]).await.unwrap();
    assert!(!groups.to_string().contains("ansible-ops"), "{groups}");
}
