//! The container power endpoints: `vzstart`, `vzstop`, `vzshutdown` and `vzreboot` tasks under the config lock.

use std::sync::Arc;

use serde_json::json;

use super::config::apply_all_pending;
use super::{check_lock, get_ct, injected_text, no_such_ct_text};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::qemu::check_skiplock;
use crate::sim::Sim;
use crate::state::now;

/// `status/start|stop|shutdown|reboot`; `kind` is the task type (`vzstart`, ...). PVE refuses a start of a running
/// container, and a stop, shutdown or reboot of a stopped one, before it forks.
pub(crate) fn power(sim: &Arc<Sim>, req: &Req, kind: &'static str) -> ApiResult {
    let node = req.node().to_string();
    let vmid = req.vmid();
    if matches!(kind, "vzstart" | "vzstop") {
        check_skiplock(req)?;
    }
    let skiplock = req.flag("skiplock");
    let mut st = sim.write();
    let ct = get_ct(&st, &node, vmid)?;
    match kind {
        "vzstart" if ct.running => {
            return Err(ApiError::die(format!("CT {vmid} already running")));
        }
        // PVE's reboot handler says VM here.
        "vzreboot" if !ct.running => {
            return Err(ApiError::die(format!("VM {vmid} not running")));
        }
        "vzstop" | "vzshutdown" if !ct.running => {
            return Err(ApiError::die(format!("CT {vmid} not running")));
        }
        _ => {}
    }
    if matches!(kind, "vzstart" | "vzstop" | "vzshutdown") && crate::ha::vm_is_ha_managed(&st, vmid)
    {
        if kind == "vzstop" && req.flag("overrule-shutdown") {
            return Err(ApiError::param(
                "overrule-shutdown",
                "Not applicable for HA resources.",
            ));
        }
        let upid = crate::qemu::ha_request(sim, &mut st, req, kind, "CT");
        return Ok(Reply::data(json!(upid)));
    }
    let sim2 = Arc::clone(sim);
    let upid = sim.guest_task(
        &mut st,
        req,
        kind,
        sim.flock_exclusive(vmid),
        Box::new(move |st, log, injected| {
            if let Some(m) = injected {
                return Err(injected_text(vmid, m));
            }
            let pid = st.next_pid();
            let Some(ct) = st.lxc.get(&vmid) else {
                return Err(no_such_ct_text(&node, vmid));
            };
            if !skiplock && ct.lock() != Some("mounted") {
                check_lock(ct)?;
            }
            match kind {
                "vzstart" => {
                    if ct.is_template() {
                        return Err("you can't start a CT if it's a template".to_string());
                    }
                    if ct.running {
                        return Err(format!("CT {vmid} already running"));
                    }
                    apply_all_pending(&sim2, st, vmid);
                    if let Some(ct) = st.lxc.get_mut(&vmid) {
                        ct.running = true;
                        ct.started_at = now();
                        ct.pid = pid;
                    }
                }
                "vzreboot" => {
                    if !ct.running {
                        return Err(format!("VM {vmid} not running"));
                    }
                    apply_all_pending(&sim2, st, vmid);
                    if let Some(ct) = st.lxc.get_mut(&vmid) {
                        ct.started_at = now();
                        ct.pid = pid;
                    }
                }
                _ => {
                    if !ct.running {
                        return Err(format!("CT {vmid} not running"));
                    }
                    if let Some(ct) = st.lxc.get_mut(&vmid) {
                        ct.running = false;
                        ct.started_at = 0;
                        ct.pid = 0;
                    }
                    // lxc-pve-poststop-hook applies what is pending.
                    apply_all_pending(&sim2, st, vmid);
                    log.line(format!("CT {vmid} stopped"));
                }
            }
            Ok(())
        }),
    );
    st.touch();
    Ok(Reply::data(json!(upid)))
}
