//! Which handler serves which request: PVE's path templates (`route`), the handler behind
//! each method and template (`call`, which also runs `background_delay`/`delay` waits on the
//! task), the served list the schema is generated from (`served`) and directory indexes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::faults::Drawn;
use crate::mapping::Kind;
use crate::sim::Sim;
use crate::{
    access, backup, cluster, ha, lxc, mapping, migrate, pools, qemu, storage, storage_cfg, tasks,
};

/// Matches an API path to its template; path parameters are returned in order.
pub(crate) fn route(segments: &[&str]) -> Option<(&'static str, Vec<(String, String)>)> {
    if let Some(r) = crate::firewall::route(segments) {
        return Some(r);
    }
    let p = |k: &str, v: &str| (k.to_string(), v.to_string());
    let r = match segments {
        [] => ("/", vec![]),
        ["version"] => ("/version", vec![]),
        ["cluster"] => ("/cluster", vec![]),
        ["cluster", "resources"] => ("/cluster/resources", vec![]),
        ["cluster", "nextid"] => ("/cluster/nextid", vec![]),
        ["cluster", "tasks"] => ("/cluster/tasks", vec![]),
        ["cluster", "status"] => ("/cluster/status", vec![]),
        ["cluster", "backup"] => ("/cluster/backup", vec![]),
        ["cluster", "backup", id] => ("/cluster/backup/{id}", vec![p("id", id)]),
        ["cluster", "mapping"] => ("/cluster/mapping", vec![]),
        ["cluster", "mapping", "pci"] => ("/cluster/mapping/pci", vec![]),
        ["cluster", "mapping", "pci", id] => ("/cluster/mapping/pci/{id}", vec![p("id", id)]),
        ["cluster", "mapping", "usb"] => ("/cluster/mapping/usb", vec![]),
        ["cluster", "mapping", "usb", id] => ("/cluster/mapping/usb/{id}", vec![p("id", id)]),
        ["access"] => ("/access", vec![]),
        ["access", "users"] => ("/access/users", vec![]),
        ["access", "users", u] => ("/access/users/{userid}", vec![p("userid", u)]),
        ["access", "users", u, "token"] => ("/access/users/{userid}/token", vec![p("userid", u)]),
        ["access", "users", u, "token", t] => (
            "/access/users/{userid}/token/{tokenid}",
            vec![p("userid", u), p("tokenid", t)],
        ),
        ["access", "groups"] => ("/access/groups", vec![]),
        ["access", "groups", g] => ("/access/groups/{groupid}", vec![p("groupid", g)]),
        ["access", "roles"] => ("/access/roles", vec![]),
        ["access", "roles", r] => ("/access/roles/{roleid}", vec![p("roleid", r)]),
        ["access", "acl"] => ("/access/acl", vec![]),
        ["access", "domains"] => ("/access/domains", vec![]),
        ["pools"] => ("/pools", vec![]),
        ["pools", id] => ("/pools/{poolid}", vec![p("poolid", id)]),
        ["cluster", "ha"] => ("/cluster/ha", vec![]),
        ["cluster", "ha", "resources"] => ("/cluster/ha/resources", vec![]),
        ["cluster", "ha", "resources", s] => ("/cluster/ha/resources/{sid}", vec![p("sid", s)]),
        ["cluster", "ha", "resources", s, "migrate"] => {
            ("/cluster/ha/resources/{sid}/migrate", vec![p("sid", s)])
        }
        ["cluster", "ha", "resources", s, "relocate"] => {
            ("/cluster/ha/resources/{sid}/relocate", vec![p("sid", s)])
        }
        ["cluster", "ha", "rules"] => ("/cluster/ha/rules", vec![]),
        ["cluster", "ha", "rules", r] => ("/cluster/ha/rules/{rule}", vec![p("rule", r)]),
        ["cluster", "ha", "status"] => ("/cluster/ha/status", vec![]),
        ["cluster", "ha", "status", "current"] => ("/cluster/ha/status/current", vec![]),
        ["cluster", "ha", "status", "manager_status"] => {
            ("/cluster/ha/status/manager_status", vec![])
        }
        ["nodes"] => ("/nodes", vec![]),
        ["storage"] => ("/storage", vec![]),
        ["storage", s] => ("/storage/{storage}", vec![p("storage", s)]),
        ["nodes", n] => ("/nodes/{node}", vec![p("node", n)]),
        ["nodes", n, "tasks"] => ("/nodes/{node}/tasks", vec![p("node", n)]),
        ["nodes", n, "qemu"] => ("/nodes/{node}/qemu", vec![p("node", n)]),
        ["nodes", n, "lxc"] => ("/nodes/{node}/lxc", vec![p("node", n)]),
        ["nodes", n, "qemu", v] => (
            "/nodes/{node}/qemu/{vmid}",
            vec![p("node", n), p("vmid", v)],
        ),
        ["nodes", n, "lxc", v] => ("/nodes/{node}/lxc/{vmid}", vec![p("node", n), p("vmid", v)]),
        ["nodes", n, "lxc", v, sub] => {
            let t = match *sub {
                "config" => "/nodes/{node}/lxc/{vmid}/config",
                "pending" => "/nodes/{node}/lxc/{vmid}/pending",
                "status" => "/nodes/{node}/lxc/{vmid}/status",
                "migrate" => "/nodes/{node}/lxc/{vmid}/migrate",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "lxc", v, "status", action] => {
            let t = match *action {
                "current" => "/nodes/{node}/lxc/{vmid}/status/current",
                "start" => "/nodes/{node}/lxc/{vmid}/status/start",
                "stop" => "/nodes/{node}/lxc/{vmid}/status/stop",
                "shutdown" => "/nodes/{node}/lxc/{vmid}/status/shutdown",
                "reboot" => "/nodes/{node}/lxc/{vmid}/status/reboot",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "qemu", v, sub] => {
            let t = match *sub {
                "config" => "/nodes/{node}/qemu/{vmid}/config",
                "pending" => "/nodes/{node}/qemu/{vmid}/pending",
                "clone" => "/nodes/{node}/qemu/{vmid}/clone",
                "template" => "/nodes/{node}/qemu/{vmid}/template",
                "status" => "/nodes/{node}/qemu/{vmid}/status",
                "resize" => "/nodes/{node}/qemu/{vmid}/resize",
                "unlink" => "/nodes/{node}/qemu/{vmid}/unlink",
                "snapshot" => "/nodes/{node}/qemu/{vmid}/snapshot",
                "migrate" => "/nodes/{node}/qemu/{vmid}/migrate",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "qemu", v, "agent", "ping"] => (
            "/nodes/{node}/qemu/{vmid}/agent/ping",
            vec![p("node", n), p("vmid", v)],
        ),
        ["nodes", n, "qemu", v, "status", action] => {
            let t = match *action {
                "current" => "/nodes/{node}/qemu/{vmid}/status/current",
                "start" => "/nodes/{node}/qemu/{vmid}/status/start",
                "stop" => "/nodes/{node}/qemu/{vmid}/status/stop",
                "shutdown" => "/nodes/{node}/qemu/{vmid}/status/shutdown",
                "reboot" => "/nodes/{node}/qemu/{vmid}/status/reboot",
                "reset" => "/nodes/{node}/qemu/{vmid}/status/reset",
                "suspend" => "/nodes/{node}/qemu/{vmid}/status/suspend",
                "resume" => "/nodes/{node}/qemu/{vmid}/status/resume",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "tasks", u] => (
            "/nodes/{node}/tasks/{upid}",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "tasks", u, "status"] => (
            "/nodes/{node}/tasks/{upid}/status",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "tasks", u, "log"] => (
            "/nodes/{node}/tasks/{upid}/log",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "storage"] => ("/nodes/{node}/storage", vec![p("node", n)]),
        ["nodes", n, "storage", s] => (
            "/nodes/{node}/storage/{storage}",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "status"] => (
            "/nodes/{node}/storage/{storage}/status",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "content"] => (
            "/nodes/{node}/storage/{storage}/content",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "download-url"] => (
            "/nodes/{node}/storage/{storage}/download-url",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "content", rest @ ..] if !rest.is_empty() => (
            "/nodes/{node}/storage/{storage}/content/{volume}",
            vec![p("node", n), p("storage", s), p("volume", &rest.join("/"))],
        ),
        _ => return None,
    };
    Some(r)
}

/// A directory index as PVE's index methods answer it: one `{key: child}` per child path the simulator serves
/// itself (any method), in served.txt's order. Children PVE lists and the simulator does not serve are left
/// out, so that every link an index gives leads somewhere.
pub(crate) fn index(template: &str, key: &str) -> Reply {
    let prefix = if template == "/" {
        "/".to_string()
    } else {
        format!("{template}/")
    };
    let mut children: Vec<&str> = Vec::new();
    for line in crate::schema::SERVED.lines() {
        let Some((_, path)) = line.split_once(' ') else {
            continue;
        };
        let Some(child) = path.strip_prefix(&prefix) else {
            continue;
        };
        if !child.is_empty()
            && !child.contains('/')
            && !child.starts_with('{')
            && !children.contains(&child)
        {
            children.push(child);
        }
    }
    Reply::data(Value::Array(
        children.into_iter().map(|c| json!({ key: c })).collect(),
    ))
}

/// True when the simulator serves `method` on `template`.
pub(crate) fn served(method: &str, template: &str) -> bool {
    crate::schema::SERVED.lines().any(|l| {
        let mut parts = l.split_whitespace();
        parts.next() == Some(method) && parts.next() == Some(template)
    })
}

pub(super) async fn call(
    sim: &Arc<Sim>,
    method: &str,
    template: &'static str,
    user: &str,
    params: &[(String, String)],
    path_params: &[(String, String)],
    drawn: Drawn,
) -> ApiResult {
    for (k, v) in path_params {
        if let Some((_, other)) = params.iter().find(|(pk, _)| pk == k)
            && other != v
        {
            return Err(ApiError::param(
                k,
                "duplicate parameter (already defined in URI) with conflicting values!",
            ));
        }
    }
    let mut all: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| !path_params.iter().any(|(pk, _)| pk == k))
        .cloned()
        .collect();
    all.extend(path_params.iter().cloned());
    let merged = crate::schema::validate(method, template, &all).map_err(ApiError::Param)?;
    // pveproxy proxies a `/nodes/{node}/...` request to its node, resolving the name first.
    if template.starts_with("/nodes/{node}")
        && let Some(node) = merged.get("node")
    {
        if !sim.has_node(node) {
            return Err(ApiError::die(format!(
                "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
            )));
        }
        if sim.is_offline(node) {
            return Err(ApiError::Unreachable);
        }
    }
    let req = Req {
        user: user.to_string(),
        params: merged,
        faults: drawn,
    };
    access::authorize(sim, user, method, template, &req)?;
    let wait = req
        .get("background_delay")
        .or_else(|| req.get("delay"))
        .and_then(|v| v.parse::<u64>().ok());
    let reply = match (method, template) {
        ("GET", "/") => Ok(index(template, "subdir")),
        ("GET", "/version") => cluster::version(),
        ("GET", "/cluster") => Ok(index(template, "name")),
        ("GET", "/cluster/resources") => cluster::resources(sim, &req),
        ("GET", "/cluster/nextid") => cluster::nextid(sim, &req),
        ("GET", "/cluster/tasks") => tasks::cluster_list(sim),
        ("GET", "/cluster/status") => cluster::status(sim),
        ("GET", "/cluster/backup") => backup::list(sim, &req),
        ("POST", "/cluster/backup") => backup::create(sim, &req),
        ("GET", "/cluster/backup/{id}") => backup::read(sim, &req),
        ("PUT", "/cluster/backup/{id}") => backup::update(sim, &req),
        ("DELETE", "/cluster/backup/{id}") => backup::delete(sim, &req),
        ("GET", "/cluster/mapping") => Ok(index(template, "name")),
        ("GET", "/cluster/mapping/pci") => mapping::list(sim, &req, Kind::Pci),
        ("POST", "/cluster/mapping/pci") => mapping::create(sim, &req, Kind::Pci),
        ("GET", "/cluster/mapping/pci/{id}") => mapping::read(sim, &req, Kind::Pci),
        ("PUT", "/cluster/mapping/pci/{id}") => mapping::update(sim, &req, Kind::Pci),
        ("DELETE", "/cluster/mapping/pci/{id}") => mapping::delete(sim, &req, Kind::Pci),
        ("GET", "/cluster/mapping/usb") => mapping::list(sim, &req, Kind::Usb),
        ("POST", "/cluster/mapping/usb") => mapping::create(sim, &req, Kind::Usb),
        ("GET", "/cluster/mapping/usb/{id}") => mapping::read(sim, &req, Kind::Usb),
        ("PUT", "/cluster/mapping/usb/{id}") => mapping::update(sim, &req, Kind::Usb),
        ("DELETE", "/cluster/mapping/usb/{id}") => mapping::delete(sim, &req, Kind::Usb),
        ("GET", "/access") => Ok(index(template, "subdir")),
        ("GET", "/access/users") => access::users_list(sim, &req),
        ("POST", "/access/users") => access::user_create(sim, &req),
        ("GET", "/access/users/{userid}") => access::user_read(sim, &req),
        ("PUT", "/access/users/{userid}") => access::user_update(sim, &req),
        ("DELETE", "/access/users/{userid}") => access::user_delete(sim, &req),
        ("GET", "/access/users/{userid}/token") => access::token_list(sim, &req),
        ("GET", "/access/users/{userid}/token/{tokenid}") => access::token_read(sim, &req),
        ("POST", "/access/users/{userid}/token/{tokenid}") => access::token_create(sim, &req),
        ("PUT", "/access/users/{userid}/token/{tokenid}") => access::token_update(sim, &req),
        ("DELETE", "/access/users/{userid}/token/{tokenid}") => access::token_delete(sim, &req),
        ("GET", "/access/groups") => access::groups_list(sim, &req),
        ("POST", "/access/groups") => access::group_create(sim, &req),
        ("GET", "/access/groups/{groupid}") => access::group_read(sim, &req),
        ("PUT", "/access/groups/{groupid}") => access::group_update(sim, &req),
        ("DELETE", "/access/groups/{groupid}") => access::group_delete(sim, &req),
        ("GET", "/access/roles") => access::roles_list(sim, &req),
        ("POST", "/access/roles") => access::role_create(sim, &req),
        ("GET", "/access/roles/{roleid}") => access::role_read(sim, &req),
        ("PUT", "/access/roles/{roleid}") => access::role_update(sim, &req),
        ("DELETE", "/access/roles/{roleid}") => access::role_delete(sim, &req),
        ("GET", "/access/acl") => access::acl_list(sim, &req),
        ("PUT", "/access/acl") => access::acl_update(sim, &req),
        ("GET", "/access/domains") => access::domains(sim, &req),
        ("GET", "/pools") => pools::list(sim, &req),
        ("POST", "/pools") => pools::create(sim, &req),
        ("PUT", "/pools") | ("PUT", "/pools/{poolid}") => pools::update(sim, &req),
        ("DELETE", "/pools") | ("DELETE", "/pools/{poolid}") => pools::delete(sim, &req),
        ("GET", "/pools/{poolid}") => pools::read(sim, &req),
        ("GET", "/cluster/ha") => Ok(index(template, "id")),
        ("GET", "/cluster/ha/resources") => ha::resources::list(sim, &req),
        ("POST", "/cluster/ha/resources") => ha::resources::create(sim, &req),
        ("GET", "/cluster/ha/resources/{sid}") => ha::resources::read(sim, &req),
        ("PUT", "/cluster/ha/resources/{sid}") => ha::resources::update(sim, &req),
        ("DELETE", "/cluster/ha/resources/{sid}") => ha::resources::delete(sim, &req),
        ("POST", "/cluster/ha/resources/{sid}/migrate") => {
            ha::resources::motion(sim, &req, "migrate")
        }
        ("POST", "/cluster/ha/resources/{sid}/relocate") => {
            ha::resources::motion(sim, &req, "relocate")
        }
        ("GET", "/cluster/ha/rules") => ha::rules::list(sim, &req),
        ("POST", "/cluster/ha/rules") => ha::rules::create(sim, &req),
        ("GET", "/cluster/ha/rules/{rule}") => ha::rules::read(sim, &req),
        ("PUT", "/cluster/ha/rules/{rule}") => ha::rules::update(sim, &req),
        ("DELETE", "/cluster/ha/rules/{rule}") => ha::rules::delete(sim, &req),
        ("GET", "/cluster/ha/status") => Ok(index(template, "name")),
        ("GET", "/cluster/ha/status/current") => ha::status::current(sim),
        ("GET", "/cluster/ha/status/manager_status") => ha::status::manager_status(sim),
        ("GET", "/nodes/{node}/qemu/{vmid}/migrate") => migrate::qemu_precondition(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/migrate") => migrate::qemu_migrate(sim, &req),
        ("POST", "/nodes/{node}/lxc/{vmid}/migrate") => migrate::lxc_migrate(sim, &req),
        ("GET", "/nodes") => cluster::nodes(sim),
        ("GET", "/storage") => storage_cfg::index(sim, &req),
        ("GET", "/storage/{storage}") => storage_cfg::read(sim, &req),
        ("GET", "/nodes/{node}") => Ok(index(template, "name")),
        ("GET", "/nodes/{node}/tasks") => tasks::node_list(sim, &req),
        ("GET", "/nodes/{node}/lxc") => lxc::list(sim, &req),
        ("POST", "/nodes/{node}/lxc") => lxc::create(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}") => lxc::index(sim, &req),
        ("DELETE", "/nodes/{node}/lxc/{vmid}") => lxc::destroy(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/config") => lxc::get_config(sim, &req),
        ("PUT", "/nodes/{node}/lxc/{vmid}/config") => lxc::update_config(sim, &req).await,
        ("GET", "/nodes/{node}/lxc/{vmid}/pending") => lxc::pending(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/status") => lxc::status_index(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/status/current") => lxc::status_current(sim, &req),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/start") => lxc::power(sim, &req, "vzstart"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/stop") => lxc::power(sim, &req, "vzstop"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown") => lxc::power(sim, &req, "vzshutdown"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/reboot") => lxc::power(sim, &req, "vzreboot"),
        ("GET", "/nodes/{node}/qemu") => qemu::list(sim, &req),
        ("POST", "/nodes/{node}/qemu") => qemu::create(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}") => qemu::index(sim, &req),
        ("PUT", "/nodes/{node}/qemu/{vmid}/unlink") => qemu::unlink(sim, &req).await,
        ("DELETE", "/nodes/{node}/qemu/{vmid}") => qemu::destroy(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/config") => qemu::get_config(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/config") => qemu::update_config_async(sim, &req),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config") => qemu::update_config_sync(sim, &req).await,
        ("GET", "/nodes/{node}/qemu/{vmid}/pending") => qemu::pending(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/snapshot") => qemu::snapshot_list(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => qemu::clone_vm(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/template") => qemu::template(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/status") => qemu::status_index(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/status/current") => qemu::status_current(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping") => qemu::agent_ping(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/start") => qemu::power(sim, &req, "qmstart"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/stop") => qemu::power(sim, &req, "qmstop"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown") => {
            qemu::power(sim, &req, "qmshutdown")
        }
        ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot") => qemu::power(sim, &req, "qmreboot"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/reset") => qemu::power(sim, &req, "qmreset"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/suspend") => qemu::power(sim, &req, "qmpause"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/resume") => qemu::power(sim, &req, "qmresume"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize") => qemu::resize(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}") => tasks::index(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}/status") => tasks::status(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}/log") => tasks::log(sim, &req),
        ("GET", "/nodes/{node}/storage") => storage::list(sim, &req),
        ("GET", "/nodes/{node}/storage/{storage}") => Ok(index(template, "subdir")),
        ("GET", "/nodes/{node}/storage/{storage}/status") => storage::status(sim, &req),
        ("GET", "/nodes/{node}/storage/{storage}/content") => storage::content(sim, &req),
        ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}") => {
            storage::delete_volume(sim, &req)
        }
        ("POST", "/nodes/{node}/storage/{storage}/download-url") => {
            storage::download_url(sim, &req)
        }
        (method, template) if crate::firewall::serves(template) => {
            crate::firewall::call(sim, method, template, &req)
        }
        _ => Err(ApiError::not_implemented(method, template)),
    }?;
    // `background_delay` (qemu-server `update_vm_api`) and `delay` (pve-storage's volume delete) wait for the
    // task: `null` when it ended OK or with warnings (`upid_status_is_error`), a 500 when it failed, the UPID
    // when it still runs.
    if let (Some(secs), Value::String(upid)) = (wait, &reply.data) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let status = sim
                .read()
                .tasks
                .get(upid)
                .and_then(|t| t.exitstatus.clone());
            match status {
                Some(s) if s == "OK" || is_warnings(&s) => return Ok(Reply::data(Value::Null)),
                Some(s) if template == "/nodes/{node}/qemu/{vmid}/config" => {
                    let vmid = req.vmid();
                    return Err(ApiError::die(format!("failed to update VM {vmid}: {s}")));
                }
                Some(s) => return Err(ApiError::die(s)),
                None => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(reply)
}

/// A task exit status `WARNINGS: <n>` (pve-common `PVE::UPID::status_is_error` counts it as success).
fn is_warnings(status: &str) -> bool {
    status
        .strip_prefix("WARNINGS: ")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
