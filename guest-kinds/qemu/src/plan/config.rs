//! The diff passes over the VM's own keys (and `diff_config`, which runs every pass in order): name, description, tags, CPU, memory, hardware (sockets, NUMA, machine, BIOS, display, serial, SCSI controller) and options (agent, startup, hotplug, boot order).

use proxops_kind_sdk::model::{Anomaly, Drift};
use proxops_kind_sdk::propstring::{PropString, parse_bool};

use super::cloud_init::diff_cloud_init_data;
use super::disks::diff_disks;
use super::nics::diff_nics;
use super::pci::diff_pci;
use super::special_drives::diff_special_drives;
use super::{Ctx, Diff, Outcome, boolean, simple};
use crate::desired::Desired;
use crate::validate::parse_hotplug;
use crate::wire;

/// The VM's own keys, pass by pass, then the passes over its disks, drives, NICs, PCI
/// devices and cloud-init data.
pub(super) fn diff_config(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    diff_identity(d, x);
    diff_compute(d, x);
    diff_hardware(d, x);
    diff_options(d, x);
    diff_extra(d, x);
    diff_disks(ctx, x);
    diff_special_drives(ctx, x);
    diff_nics(d, x);
    diff_pci(ctx, x);
    diff_cloud_init_data(ctx, x);
}

/// The PVE name, description and tags.
fn diff_identity(d: &Desired, x: &mut Diff<'_>) {
    x.key(
        "name",
        false,
        simple(
            "spec.pve-name",
            d.pve_name.clone(),
            |l| l == d.pve_name,
            None,
        ),
    );
    if let Some(desc) = &d.pve_description {
        let want = desc.trim_end().to_string();
        x.key(
            "description",
            false,
            simple(
                "spec.pve-description",
                desc.clone(),
                move |l| l.trim_end() == want,
                None,
            ),
        );
    }
    let tags = d.tags.clone();
    x.key(
        "tags",
        false,
        simple(
            "spec.tags",
            d.tags.join(";"),
            move |l| wire::tags(Some(l)) == tags,
            None,
        ),
    );
}

/// Memory, cores and CPU type.
fn diff_compute(d: &Desired, x: &mut Diff<'_>) {
    let mem = d.memory_mib;
    x.key(
        "memory",
        false,
        simple(
            "spec.memory",
            mem.to_string(),
            move |l| {
                PropString::parse_with_default(l, "current")
                    .ok()
                    .and_then(|p| p.bare)
                    .and_then(|v| v.parse::<u64>().ok())
                    == Some(mem)
            },
            Some("512"),
        ),
    );
    let cores = d.cpu.cores.to_string();
    x.key(
        "cores",
        false,
        simple(
            "spec.cpu.cores",
            cores.clone(),
            move |l| l == cores,
            Some("1"),
        ),
    );
    x.key("cpu", false, |live| {
        if wire::cpu_eq(d, live) {
            Outcome::Same
        } else {
            let v = wire::cpu_value(d, live);
            Outcome::Write(
                v.clone(),
                vec![Drift::new(
                    "spec.cpu.type",
                    live.map(str::to_string),
                    Some(v),
                )],
            )
        }
    });
}

/// Sockets, NUMA, machine, BIOS, display, serial port and SCSI controller.
fn diff_hardware(d: &Desired, x: &mut Diff<'_>) {
    let hw = &d.hardware;
    if let Some(s) = hw.sockets {
        x.key(
            "sockets",
            false,
            simple(
                "spec.hardware.sockets",
                s.to_string(),
                move |l| l == s.to_string(),
                Some("1"),
            ),
        );
    }
    if let Some(n) = hw.numa {
        x.key("numa", false, boolean("spec.hardware.numa", n, "0"));
    }
    if let Some(m) = &hw.machine {
        let m = m.clone();
        x.key("machine", true, move |live| {
            if wire::machine_family(live) == m {
                return Outcome::Same;
            }
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "type").ok())
                .unwrap_or_default();
            p.bare = Some(wire::machine_type(&m).to_string());
            let v = p.canonical();
            Outcome::Write(
                v.clone(),
                vec![Drift::new(
                    "spec.hardware.machine",
                    live.map(str::to_string),
                    Some(m.clone()),
                )],
            )
        });
    }
    if let Some(bios) = &hw.bios {
        let want = bios.clone();
        x.key(
            "bios",
            true,
            simple(
                "spec.hardware.bios",
                bios.clone(),
                move |l| l == want,
                Some("seabios"),
            ),
        );
    }
    if let Some(vga) = &hw.display {
        let vga = vga.clone();
        x.key("vga", false, move |live| {
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "type").ok())
                .unwrap_or_default();
            if p.bare.as_deref().unwrap_or("std") == vga {
                return Outcome::Same;
            }
            p.bare = Some(vga.clone());
            let v = p.canonical();
            Outcome::Write(
                v,
                vec![Drift::new(
                    "spec.hardware.display",
                    live.map(str::to_string),
                    Some(vga.clone()),
                )],
            )
        });
    }
    if let Some(s) = &hw.serial0 {
        let want = s.clone();
        let cmp = simple("spec.hardware.serial0", s.clone(), move |l| l == want, None);
        let live = x.cfg.get("serial0");
        if s != "socket" || live.is_some_and(|l| l != "socket") {
            // A host device, to or from: reported, never written (PVE lets only root@pam).
            if let Outcome::Write(_, drift) = cmp(live) {
                x.out.drift.extend(drift);
                x.out.anomalies.push(serial_device_anomaly(s));
            }
        } else {
            x.key("serial0", false, cmp);
        }
    }
    if let Some(s) = &d.scsihw {
        let want = s.clone();
        x.key(
            "scsihw",
            false,
            simple(
                "spec.disks[].controller",
                s.clone(),
                move |l| l == want,
                Some("lsi"),
            ),
        );
    }
}

/// The options: the plain flags, the agent, startup order, hotplug and boot order.
fn diff_options(d: &Desired, x: &mut Diff<'_>) {
    let o = &d.options;
    for (k, v, default) in [
        ("onboot", o.onboot, "0"),
        ("protection", o.protection, "0"),
        ("acpi", o.acpi, "1"),
        ("tablet", o.tablet, "1"),
    ] {
        if let Some(v) = v {
            x.key(k, false, boolean(&format!("spec.options.{k}"), v, default));
        }
    }
    if let Some(agent) = o.agent {
        x.key("agent", false, move |live| {
            let mut p = live
                .and_then(|l| PropString::parse_with_default(l, "enabled").ok())
                .unwrap_or_default();
            if p.bare.as_deref().and_then(parse_bool).unwrap_or(false) == agent {
                return Outcome::Same;
            }
            p.bare = Some(wire::b(agent));
            Outcome::Write(
                p.canonical(),
                vec![Drift::new(
                    "spec.options.agent",
                    live.map(str::to_string),
                    Some(wire::b(agent)),
                )],
            )
        });
    }
    if let Some(s) = &o.startup {
        let want = wire::startup(s);
        x.key(
            "startup",
            false,
            simple(
                "spec.options.startup",
                s.clone(),
                move |l| wire::startup(l) == want,
                None,
            ),
        );
    }
    if let Some(h) = &o.hotplug {
        let want = h.clone();
        let v = if h.is_empty() {
            "0".to_string()
        } else {
            h.join(",")
        };
        x.key(
            "hotplug",
            false,
            simple(
                "spec.options.hotplug",
                v,
                move |l| parse_hotplug(l) == want,
                Some("network,disk,usb"),
            ),
        );
    }
    if let Some(bo) = &o.boot_order {
        let want = bo.clone();
        x.key(
            "boot",
            false,
            simple(
                "spec.options.boot-order",
                format!("order={}", bo.join(";")),
                move |l| wire::boot_order(Some(l)).as_ref() == Some(&want),
                None,
            ),
        );
    }
}

/// The passthrough keys of `spec.extra`, compared as PVE wire strings; numbers by value, as
/// PVE stores them canonically (`0100` is read back as `100`, `1.50` as `1.5`).
fn diff_extra(d: &Desired, x: &mut Diff<'_>) {
    for (k, v) in &d.extra {
        let want = v.clone();
        let path = format!("spec.extra.{k}");
        let cmp = simple(
            &path,
            v.clone(),
            move |l| l == want || same_number(l, &want),
            None,
        );
        if crate::keys::root_only(k) {
            // Reported, never written (an adopted value that matches is fine).
            if let Outcome::Write(_, drift) = cmp(x.cfg.get(k)) {
                x.out.drift.extend(drift);
                x.out.anomalies.push(root_only_anomaly(&path, k));
            }
            continue;
        }
        x.key(k, false, cmp);
    }
}

/// The anomaly for a serial port proxops would have to set to, or change from, a host device:
/// PVE lets only `root@pam` (`$check_vm_create_serial_perm`, and its check on update).
pub(super) fn serial_device_anomaly(want: &str) -> Anomaly {
    Anomaly::new(
        "spec.hardware.serial0",
        format!(
            "PVE lets only root@pam set a serial port to a host device, or change one that is (\"only root can set 'serial0' config for real devices\"); proxops uses an API token, so it does not send `serial0={want}`, a write known to fail. Set it in PVE as root@pam (proxops then sees it match), or use `socket`"
        ),
    )
}

/// The anomaly for an extra key proxops would have to write but PVE lets only `root@pam` set.
pub(super) fn root_only_anomaly(path: &str, key: &str) -> Anomaly {
    Anomaly::new(
        path,
        format!(
            "PVE lets only root@pam set `{key}` (\"only root can set '{key}' config\"); proxops uses an API token, so it does not send a write known to fail. Set it in PVE as root@pam (proxops then sees it match), or remove it from spec.extra"
        ),
    )
}

/// Whether both texts are plain decimal numbers of the same value.
fn same_number(a: &str, b: &str) -> bool {
    let number = |s: &str| {
        let plain = !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_digit() || c == b'.' || c == b'-');
        plain.then(|| s.parse::<f64>().ok()).flatten()
    };
    matches!((number(a), number(b)), (Some(x), Some(y)) if x == y)
}
