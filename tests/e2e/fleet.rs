//! The fleet the reliability tests (faults, crash, concurrency) converge: the example repository
//! (examples/homelab) plus generated VMs; the checks of the simulator's end state (every declared
//! guest there once, as declared, unlocked, clones with their own identity, no orphaned volume)
//! and of its request log (no create, clone, download or delete repeated for one object without
//! a read in between that could show whether the first attempt landed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proxops_sim::RequestRecord;
use serde_json::Value;

/// One guest the fleet declares.
#[derive(Debug, Clone)]
pub struct Guest {
    pub vmid: u32,
    pub name: String,
    pub node: String,
    pub template: bool,
    pub running: bool,
    /// The cloud-init user a clone must carry instead of its template's.
    pub ciuser: Option<String>,
}

fn guest(vmid: u32, name: &str, node: &str, template: bool, running: bool) -> Guest {
    Guest {
        vmid,
        name: name.into(),
        node: node.into(),
        template,
        running,
        ciuser: None,
    }
}

/// Writes examples/homelab's guests and `generated` more VMs (ids from 300, both nodes, one in
/// four running) into the repository at `repo` (its `clusters/` is the caller's); returns them.
pub fn write(repo: &Path, generated: u32) -> Vec<Guest> {
    let example = crate::support::workspace().join("examples/homelab");
    for dir in ["vm/lab", "templatevm/lab"] {
        let to = repo.join(dir);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(example.join(dir)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let mut guests = vec![
        guest(9000, "debian-12", "pve01", true, false),
        Guest {
            ciuser: Some("deploy".into()),
            ..guest(110, "app-01", "pve01", false, true)
        },
        guest(101, "web-01", "pve01", false, true),
        guest(201, "db-01", "pve02", false, true),
        guest(202, "build-runner", "pve02", false, false),
    ];
    for i in 0..generated {
        let vmid = 300 + i;
        let name = format!("gen-{vmid}");
        let node = if i % 2 == 0 { "pve01" } else { "pve02" };
        let running = i % 4 == 0;
        let extra = if running { "" } else { "  state: stopped\n" };
        std::fs::write(
            repo.join(format!("vm/lab/{name}.yaml")),
            crate::support::vm(&name, node, vmid, extra),
        )
        .unwrap();
        guests.push(guest(vmid, &name, node, false, running));
    }
    guests
}

/// Everything wrong with a simulator state (`GET /_sim/state`, the state file) against the
/// declared guests; empty when it is exactly the desired state.
pub fn state_problems(state: &Value, declared: &[Guest]) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = serde_json::Map::new();
    let vms = state["vms"].as_object().unwrap_or(&empty);
    let conf = |vm: &Value, key: &str| vm["conf"][key].as_str().map(str::to_string);
    for g in declared {
        let Some(vm) = vms.get(&g.vmid.to_string()) else {
            problems.push(format!("{} ({}) is missing", g.vmid, g.name));
            continue;
        };
        if conf(vm, "name").as_deref() != Some(g.name.as_str()) {
            problems.push(format!("{} is named {:?}", g.vmid, conf(vm, "name")));
        }
        if vm["node"].as_str() != Some(g.node.as_str()) {
            problems.push(format!("{} is on {}", g.vmid, vm["node"]));
        }
        if (conf(vm, "template").as_deref() == Some("1")) != g.template {
            problems.push(format!("{}: template flag is not {}", g.vmid, g.template));
        }
        if vm["running"].as_bool().unwrap_or(false) != g.running {
            problems.push(format!("{}: running is not {}", g.vmid, g.running));
        }
        if let Some(lock) = conf(vm, "lock") {
            problems.push(format!("{} is left locked ({lock})", g.vmid));
        }
        if let Some(user) = &g.ciuser
            && conf(vm, "ciuser").as_ref() != Some(user)
        {
            problems.push(format!(
                "{} kept another identity: ciuser {:?}",
                g.vmid,
                conf(vm, "ciuser")
            ));
        }
    }
    let declared_ids: BTreeSet<String> = declared.iter().map(|g| g.vmid.to_string()).collect();
    for (id, vm) in vms {
        if !declared_ids.contains(id) {
            problems.push(format!("undeclared guest {id} ({:?})", conf(vm, "name")));
        }
    }
    // A guest's volume that no config (current or pending) references is orphaned.
    let referenced: BTreeSet<String> = vms
        .values()
        .flat_map(|vm| {
            ["conf", "pending"].into_iter().flat_map(move |section| {
                vm[section]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, v)| v.as_str())
                    .map(|v| v.split(',').next().unwrap_or_default().to_string())
            })
        })
        .collect();
    for volume in state["volumes"].as_object().unwrap_or(&empty).values() {
        let volid = volume["volid"].as_str().unwrap_or_default();
        if volume["content"] == "images" && !referenced.contains(volid) {
            problems.push(format!("orphaned volume {volid}"));
        }
    }
    problems
}

/// The object a create, clone, download or delete request is about; `None` for other requests.
fn non_idempotent(r: &RequestRecord) -> Option<String> {
    let param = |name: &str| {
        r.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let parts: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    match (r.method.as_str(), parts.as_slice()) {
        ("POST", ["nodes", _, "qemu"]) => Some(format!("qemu/{}", param("vmid"))),
        ("POST", ["nodes", _, "qemu", _, "clone"]) => Some(format!("qemu/{}", param("newid"))),
        ("DELETE", ["nodes", _, "qemu", id]) => Some(format!("qemu/{id}")),
        ("POST", ["nodes", node, "storage", storage, "download-url"]) => {
            Some(format!("volume {node}/{storage}/{}", param("filename")))
        }
        ("DELETE", ["nodes", node, "storage", storage, "content", volume]) => {
            Some(format!("volume {node}/{storage}/{volume}"))
        }
        _ => None,
    }
}

/// Whether a successful read could show if a request about `object` landed.
fn witnesses(r: &RequestRecord, object: &str) -> bool {
    if r.method != "GET" || r.status != 200 {
        return false;
    }
    let parts: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    match parts.as_slice() {
        ["cluster", "resources"] | ["cluster", "tasks"] => object.starts_with("qemu/"),
        ["nodes", _, "tasks"] => true,
        ["nodes", _, "qemu"] => object.starts_with("qemu/"),
        ["nodes", _, "qemu", id, ..] => object == format!("qemu/{id}"),
        ["nodes", node, "storage", storage, "content"] => {
            object.starts_with(&format!("volume {node}/{storage}/"))
        }
        _ => false,
    }
}

/// Creates, clones, downloads and deletes sent again for the same object with no read between
/// that could show whether the earlier one landed (its answer may have been lost).
pub fn blind_repeats(log: &[RequestRecord]) -> Vec<String> {
    let mut unread: BTreeMap<String, u64> = BTreeMap::new();
    let mut found = Vec::new();
    for r in log {
        unread.retain(|object, _| !witnesses(r, object));
        if let Some(object) = non_idempotent(r) {
            if let Some(earlier) = unread.get(&object) {
                found.push(format!(
                    "{} {} (#{}) repeats #{earlier} for {object} without a read between",
                    r.method, r.path, r.seq
                ));
            }
            unread.insert(object, r.seq);
        }
    }
    found
}

/// Non-idempotent requests whose answer the client never got (a reset or a lost answer).
pub fn lost_answers(log: &[RequestRecord]) -> usize {
    log.iter()
        .filter(|r| r.status == 0 && non_idempotent(r).is_some())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        seq: u64,
        method: &str,
        path: &str,
        params: &[(&str, &str)],
        status: u16,
    ) -> RequestRecord {
        RequestRecord {
            seq,
            method: method.into(),
            path: path.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            status,
            received_us: seq,
        }
    }

    #[test]
    fn a_repeat_needs_a_read_between() {
        let create =
            |seq, status| record(seq, "POST", "/nodes/pve01/qemu", &[("vmid", "300")], status);
        let read = |seq| record(seq, "GET", "/cluster/resources", &[], 200);
        let failed_read = |seq| record(seq, "GET", "/cluster/resources", &[], 503);
        for (log, blind) in [
            (vec![create(1, 0), create(2, 200)], 1),
            (vec![create(1, 0), read(2), create(3, 200)], 0),
            (vec![create(1, 0), failed_read(2), create(3, 200)], 1),
            (
                vec![
                    create(1, 0),
                    record(2, "GET", "/nodes/pve01/qemu/301/config", &[], 200),
                    create(3, 200),
                ],
                1,
            ),
            (
                vec![
                    create(1, 200),
                    record(2, "POST", "/nodes/pve01/qemu", &[("vmid", "301")], 200),
                ],
                0,
            ),
        ] {
            assert_eq!(blind_repeats(&log).len(), blind, "{log:?}");
        }
    }
}
