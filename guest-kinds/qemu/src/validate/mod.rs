//! `validate`: a VM or TemplateVM manifest (JSON) to its normalised [`Desired`] state, failing
//! closed on every rule of the spec with file-independent field paths.

mod cloud_init;
mod devices;

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, Diag, choices, index, join, type_name};
use proxops_kind_sdk::size;
use proxops_kind_sdk::{manifest, sets};
use serde_json::{Map, Value};

use crate::desired::*;
use crate::keys::*;
use crate::secrets::Secrets;
use crate::{cloudinit, syntax};
use cloud_init::check_cloud_init_data;
use devices::{check_disks, check_hardware, check_networks};

type Obj = Map<String, Value>;

/// A validated manifest: the desired state and non-fatal findings (the SDK's form).
pub type Validated = proxops_kind_sdk::kind::Validated<Desired>;

/// Validate a manifest given as JSON text.
pub fn validate_json(
    flavour: Flavour,
    manifest: &str,
    secrets: &dyn Secrets,
) -> Result<Validated, Vec<Diag>> {
    match serde_json::from_str::<Value>(manifest) {
        Ok(v) => validate(flavour, &v, secrets),
        Err(e) => Err(vec![Diag::error(
            "",
            format!("manifest is not valid JSON: {e}"),
        )]),
    }
}

/// Validate a manifest. The SOPS references of the cloud-init data are resolved through
/// `secrets` (and the values dropped): a missing, empty, denied or malformed reference fails
/// closed here, before any PVE call. The desired state keeps only the references.
pub fn validate(
    flavour: Flavour,
    doc: &Value,
    secrets: &dyn Secrets,
) -> Result<Validated, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = manifest::envelope(&mut c, doc, flavour.kind());
    let desired = spec.and_then(|spec| check_spec(&mut c, flavour, name.as_deref(), spec));
    // Resolve only references that are well-formed; malformed ones were reported above.
    if !c.has_errors()
        && let Some(d) = &desired
        && let Err(errors) = cloudinit::resolve(d.cloud_init_data.as_ref(), secrets)
    {
        for e in errors {
            c.error(e.path, e.message);
        }
    }
    match (c.finish(), desired) {
        (Ok(warnings), Some(desired)) => Ok(Validated { desired, warnings }),
        (Ok(_), None) => Err(vec![Diag::error("", "manifest could not be read")]),
        (Err(diags), _) => Err(diags),
    }
}

fn check_spec(
    c: &mut Checker,
    flavour: Flavour,
    name: Option<&str>,
    spec: &Obj,
) -> Option<Desired> {
    let p = "spec";
    c.unknown_keys(spec, p, SPEC_KEYS);
    let node = c.string(spec, p, "node", true);
    if let Some(n) = &node
        && !syntax::is_dns_name(n)
    {
        c.error(
            "spec.node",
            format!("`{n}` is not a PVE node name; use letters, digits and `-`"),
        );
    }
    let vmid = c
        .int(spec, p, "vmid", true, 100, 999_999_999)
        .map(|v| v as u32);
    let state = check_state(c, flavour, spec);
    let memory_mib = check_memory(c, spec);
    let cpu = check_cpu(c, spec);
    let clone = check_clone(c, spec);
    let pool = check_pool(c, spec);

    let hardware_obj = c.object_field(spec, p, "hardware", false, HARDWARE_KEYS);
    let ci_enabled = hardware_obj.is_some_and(cloud_init_enabled);
    let (disks, scsihw) = check_disks(c, spec, clone.is_some(), ci_enabled, hardware_obj);
    let networks = check_networks(c, spec);
    let hardware = hardware_obj
        .map(|h| check_hardware(c, h))
        .unwrap_or_default();
    let options = check_options(c, spec, cpu.as_ref());
    let pve_name = match c.string(spec, p, "pve-name", false) {
        Some(n) if !syntax::is_dns_name(&n) => {
            c.error("spec.pve-name", format!("`{n}` is not a valid PVE name; use letters, digits, `-` and `.` (no `_` or spaces)"));
            None
        }
        Some(n) => Some(n),
        None => name.map(str::to_string),
    };
    let pve_description = c.string(spec, p, "pve-description", false);
    if pve_description.as_ref().is_some_and(|d| d.len() > 8192) {
        c.error(
            "spec.pve-description",
            "must be at most 8192 bytes (PVE's limit)",
        );
    }
    let tags = check_tags(c, spec, vmid);
    let extra = check_extra(c, spec);
    let cloud_init_data = check_cloud_init_data(c, spec, &networks);
    let ha = check_ha(c, flavour, spec, state);
    let placement = match c
        .enumeration(spec, p, "placement", false, PLACEMENTS)
        .as_deref()
    {
        Some("migrate") => Placement::Migrate,
        _ => Placement::Fixed,
    };

    Some(Desired {
        kind: flavour,
        name: name?.to_string(),
        node: node?,
        vmid: vmid?,
        state: state?,
        memory_mib: memory_mib?,
        cpu: cpu?,
        disks,
        scsihw,
        networks,
        hardware,
        options,
        pve_name: pve_name?,
        pve_description,
        tags,
        extra,
        clone,
        cloud_init_data,
        ha,
        placement,
        pool,
    })
}

/// `spec.ha`: VM only (a template never runs), options with PVE's defaults, and a state
/// that agrees with `spec.state` (it defaults to it): HA acts on its requested state, so a
/// contradiction would have HA and proxops undo each other's work on every cycle.
fn check_ha(
    c: &mut Checker,
    flavour: Flavour,
    spec: &Obj,
    power: Option<PowerState>,
) -> Option<Ha> {
    let p = "spec.ha";
    if flavour == Flavour::Template && spec.get("ha").is_some_and(|v| !v.is_null()) {
        c.error(
            p,
            "a TemplateVM cannot be an HA resource: PVE never runs a template; remove spec.ha (give the VMs cloned from it their own spec.ha)",
        );
        return None;
    }
    // `comment` is no unknown field but one proxops writes itself: said so, and then left
    // out of the checks (the rare manifest with it is copied).
    let without_comment;
    let spec = match spec.get("ha") {
        Some(Value::Object(ha)) if ha.contains_key("comment") => {
            c.error(
                join(p, "comment"),
                "the HA resource's comment is proxops's ownership mark (`managed by proxops (proxops-<vmid>)`), written by proxops; remove it from the manifest",
            );
            let mut ha = ha.clone();
            ha.remove("comment");
            let mut copy = spec.clone();
            copy.insert("ha".into(), Value::Object(ha));
            without_comment = copy;
            &without_comment
        }
        _ => spec,
    };
    let ha = c.object_field(spec, "spec", "ha", false, HA_KEYS)?;
    let state = c.enumeration(ha, p, "state", false, HA_STATES);
    let max_restart = c.int(ha, p, "max-restart", false, 0, i64::from(u32::MAX));
    let max_relocate = c.int(ha, p, "max-relocate", false, 0, i64::from(u32::MAX));
    let failback = c.boolean(ha, p, "failback", false);
    let power = power?;
    let state = match state.as_deref() {
        None => match power {
            PowerState::Started => HaState::Started,
            PowerState::Stopped => HaState::Stopped,
        },
        Some(s) => HaState::parse(Some(s))?,
    };
    let clash = match (state, power) {
        (HaState::Started, PowerState::Stopped) => Some(
            "`started` has HA keep the VM running while spec.state is `stopped`: HA would start what proxops stops. Set spec.state: started, or spec.ha.state: stopped (or leave spec.ha.state out: it follows spec.state)",
        ),
        (HaState::Stopped, PowerState::Started) => Some(
            "`stopped` has HA keep the VM stopped while spec.state is `started` (the default): proxops's start would turn HA's state back to `started`. Set spec.state: stopped, or spec.ha.state: started (or leave spec.ha.state out: it follows spec.state)",
        ),
        (HaState::Disabled, PowerState::Started) => Some(
            "`disabled` has HA keep the VM stopped while spec.state is `started` (the default): proxops's start would turn HA's state to `started`. Set spec.state: stopped with spec.ha.state: disabled, or use spec.ha.state: started",
        ),
        _ => None,
    };
    if let Some(why) = clash {
        c.error(join(p, "state"), why);
        return None;
    }
    Some(Ha {
        state,
        max_restart: max_restart.map_or(Ha::DEFAULT_TRIES, |n| n as u64),
        max_relocate: max_relocate.map_or(Ha::DEFAULT_TRIES, |n| n as u64),
        failback: failback.unwrap_or(true),
    })
}

fn check_state(c: &mut Checker, flavour: Flavour, spec: &Obj) -> Option<PowerState> {
    let state = c.enumeration(spec, "spec", "state", false, &["started", "stopped"]);
    match (flavour, state.as_deref()) {
        (Flavour::Template, Some("started")) => {
            c.error(
                "spec.state",
                "a TemplateVM must be `stopped` (PVE refuses to start a template)",
            );
            None
        }
        (Flavour::Template, _) => Some(PowerState::Stopped),
        (Flavour::Vm, Some("stopped")) => Some(PowerState::Stopped),
        (Flavour::Vm, _) => Some(PowerState::Started),
    }
}

fn check_memory(c: &mut Checker, spec: &Obj) -> Option<u64> {
    let bytes = c.size(spec, "spec", "memory", true)?;
    match size::exact_mib(bytes) {
        None => {
            c.error(
                "spec.memory",
                format!("must be a whole number of MiB (PVE stores MiB), got {bytes} bytes"),
            );
            None
        }
        Some(m) if m < 16 => {
            c.error(
                "spec.memory",
                format!(
                    "must be at least 16MiB (PVE's minimum), got {}",
                    size::format_human(bytes)
                ),
            );
            None
        }
        Some(m) => Some(m),
    }
}

fn check_cpu(c: &mut Checker, spec: &Obj) -> Option<Cpu> {
    let cpu = c.object_field(spec, "spec", "cpu", true, CPU_KEYS)?;
    let t = c.string(cpu, "spec.cpu", "type", true);
    if let Some(t) = &t
        && t.contains([',', '=', ' '])
    {
        c.error(
            "spec.cpu.type",
            format!("`{t}` is not a CPU model name; use e.g. `host`, `kvm64` or `x86-64-v2-AES`"),
        );
    }
    let cores = c.int(cpu, "spec.cpu", "cores", true, 1, 4096);
    Some(Cpu {
        cpu_type: t?,
        cores: cores? as u32,
    })
}

fn check_clone(c: &mut Checker, spec: &Obj) -> Option<String> {
    let clone = c.string(spec, "spec", "clone", false)?;
    if let Some(p) = manifest::dns_label_problem(&clone) {
        c.error(
            "spec.clone",
            format!("must name a TemplateVM by its metadata.name: {p}"),
        );
        return None;
    }
    Some(clone)
}

/// `spec.pool`: a Pool manifest's name, which is the PVE pool id (a DNS label that starts
/// with a letter, as the Pool kind requires of its `metadata.name`).
fn check_pool(c: &mut Checker, spec: &Obj) -> Option<String> {
    let pool = c.string(spec, "spec", "pool", false)?;
    let problem = manifest::dns_label_problem(&pool).or_else(|| {
        (!pool.starts_with(|ch: char| ch.is_ascii_alphabetic()))
            .then(|| "a PVE pool id starts with a letter".to_string())
    });
    if let Some(p) = problem {
        c.error(
            "spec.pool",
            format!("must name a Pool manifest by its metadata.name (the PVE pool id): {p}"),
        );
        return None;
    }
    Some(pool)
}

fn cloud_init_enabled(hw: &Obj) -> bool {
    hw.get("cloud-init")
        .and_then(|v| v.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn check_options(c: &mut Checker, spec: &Obj, cpu: Option<&Cpu>) -> Options {
    let Some(o) = c.object_field(spec, "spec", "options", false, OPTIONS_KEYS) else {
        return Options::default();
    };
    let p = "spec.options";
    let startup = c.string(o, p, "startup", false).and_then(|s| {
        if syntax::is_startup(&s) {
            Some(s)
        } else {
            c.error(join(p, "startup"), format!("`{s}` is not a PVE startup value; expected e.g. `order=10` or `order=1,up=30,down=60`"));
            None
        }
    });
    let hotplug = c.string(o, p, "hotplug", false).and_then(|s| {
        let features = parse_hotplug(&s);
        match features.iter().find(|f| !HOTPLUG_FEATURES.contains(&f.as_str())) {
            Some(bad) => {
                c.error(join(p, "hotplug"), format!("unknown hotplug feature `{bad}`; expected a comma list of {} (or `0` / `1`)", choices(HOTPLUG_FEATURES)));
                None
            }
            None => Some(features),
        }
    });
    let boot_order = match o.get("boot-order") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(sets::split_list(s, &[';', ',', ' '])),
        Some(Value::Array(_)) => c.string_list(o, p, "boot-order"),
        Some(other) => {
            c.error(join(p, "boot-order"), format!("expected a list of devices such as [scsi0, net0], got {}", type_name(other)));
            None
        }
    }
    .and_then(|devs| {
        if devs.is_empty() {
            c.error(join(p, "boot-order"), "must name at least one device, or be left out");
            return None;
        }
        match devs.iter().find(|d| !syntax::is_boot_device(d)) {
            Some(bad) => {
                c.error(join(p, "boot-order"), format!("`{bad}` is not a boot device; expected disk slots (scsi0, ide2, ...) or NICs (net0, ...)"));
                None
            }
            None => Some(devs),
        }
    });
    let nested_virt = c.boolean(o, p, "nested-virt", false);
    if nested_virt == Some(true) && cpu.is_some_and(|c| c.cpu_type != "host") {
        c.error(
            join(p, "nested-virt"),
            "PVE 9.2 has no nestedvirt key: nested virtualisation needs spec.cpu.type: host (and nesting enabled in the host's kvm module)",
        );
    }
    Options {
        onboot: c.boolean(o, p, "onboot", false),
        startup,
        protection: c.boolean(o, p, "protection", false),
        agent: c.boolean(o, p, "agent", false),
        acpi: c.boolean(o, p, "acpi", false),
        tablet: c.boolean(o, p, "tablet", false),
        hotplug,
        boot_order,
        nested_virt,
        hidden: c.boolean(o, p, "hidden", false),
    }
}

/// Hotplug features as a sorted set; `1` is PVE's alias for the default, `0` for none.
pub fn parse_hotplug(s: &str) -> Vec<String> {
    match s.trim() {
        "1" => vec!["disk".into(), "network".into(), "usb".into()],
        "0" | "" => Vec::new(),
        s => sets::normalize(&sets::split_list(s, &[',']))
            .into_iter()
            .map(|f| f.trim().to_string())
            .collect(),
    }
}

/// The tags: the user's, plus the ownership tag and the vmid-bound ownership mark
/// (`proxops-<vmid>`), which a prune requires; `proxops-*` tags are reserved for the marks.
fn check_tags(c: &mut Checker, spec: &Obj, vmid: Option<u32>) -> Vec<String> {
    let mut tags = vec![crate::OWNERSHIP_TAG.to_string()];
    if let Some(vmid) = vmid {
        tags.push(crate::ownership_mark(vmid));
    }
    if let Some(list) = c.string_list(spec, "spec", "tags") {
        for (i, t) in list.iter().enumerate() {
            let lower = t.to_ascii_lowercase();
            if lower.starts_with("proxops-") {
                c.error(index("spec.tags", i), format!("`{t}`: tags starting with `proxops-` are reserved for proxops's ownership marks"));
            } else if syntax::is_tag(&lower) {
                tags.push(lower);
            } else {
                c.error(index("spec.tags", i), format!("`{t}` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`"));
            }
        }
    }
    sets::normalize(&tags)
}

fn check_extra(c: &mut Checker, spec: &Obj) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(v) = c.field(spec, "spec", "extra", false) else {
        return out;
    };
    let Value::Object(map) = v else {
        c.error(
            "spec.extra",
            format!(
                "expected a mapping of PVE keys to values, got {}",
                type_name(v)
            ),
        );
        return out;
    };
    for (k, v) in map {
        let p = join("spec.extra", k);
        if k.is_empty()
            || !k
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            c.error(p, format!("`{k}` is not a PVE config key"));
            continue;
        }
        if let Some(field) = modelled_by(k) {
            c.error(
                p,
                format!("`{k}` is modelled by {field}; set it there instead of in extra"),
            );
            continue;
        }
        let value = match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            Value::Number(n) => n.to_string(),
            other => {
                c.error(
                    p,
                    format!(
                        "expected a string, number or boolean, got {}",
                        type_name(other)
                    ),
                );
                continue;
            }
        };
        if let Some(why) = never_converges(k, &value) {
            c.error(p, why);
            continue;
        }
        out.insert(k.clone(), value);
    }
    out
}

/// Why PVE would store `value` of extra key `k` as something else on every write, so that
/// the key would drift forever: `vmgenid: 1` asks for a new generation id each time
/// (qemu-server `API2/Qemu.pm`), and PVE 9 (cgroup v2) clamps `cpuunits` to 1-10000.
fn never_converges(k: &str, value: &str) -> Option<String> {
    match k {
        "vmgenid" if value == "1" => Some(
            "`1` makes PVE generate a new vmgenid on every write, so it never converges; give the UUID to keep, or leave vmgenid out (PVE sets one at create)".into(),
        ),
        "cpuunits" if value.parse::<u64>().is_ok_and(|n| n > 10_000) => Some(format!(
            "PVE 9 (cgroup v2) stores at most 10000 cpuunits, so `{value}` would never converge; use 1-10000"
        )),
        _ => None,
    }
}

/// The spec field that models PVE key `k`, when there is one.
fn modelled_by(k: &str) -> Option<&'static str> {
    let fixed: &[(&str, &str)] = &[
        ("vmid", "spec.vmid"),
        ("name", "spec.pve-name"),
        ("description", "spec.pve-description"),
        ("tags", "spec.tags"),
        ("memory", "spec.memory"),
        ("cpu", "spec.cpu.type"),
        ("cores", "spec.cpu.cores"),
        ("sockets", "spec.hardware.sockets"),
        ("numa", "spec.hardware.numa"),
        ("machine", "spec.hardware.machine"),
        ("bios", "spec.hardware.bios"),
        ("vga", "spec.hardware.display"),
        ("serial0", "spec.hardware.serial0"),
        ("efidisk0", "spec.hardware.efi-disk"),
        ("tpmstate0", "spec.hardware.tpm"),
        ("scsihw", "spec.disks[].controller"),
        ("onboot", "spec.options.onboot"),
        ("startup", "spec.options.startup"),
        ("protection", "spec.options.protection"),
        ("agent", "spec.options.agent"),
        ("acpi", "spec.options.acpi"),
        ("tablet", "spec.options.tablet"),
        ("hotplug", "spec.options.hotplug"),
        ("boot", "spec.options.boot-order"),
        ("ciuser", "spec.cloud-init-data.ci-user"),
        ("cipassword", "spec.cloud-init-data.ci-password-ref"),
        ("sshkeys", "spec.cloud-init-data.ssh-keys"),
        ("nameserver", "spec.cloud-init-data.nameservers"),
        ("searchdomain", "spec.cloud-init-data.search-domains"),
        ("template", "kind: TemplateVM"),
        ("digest", "proxops itself (it is a request parameter)"),
        ("delete", "proxops itself (it is a request parameter)"),
        ("revert", "proxops itself (it is a request parameter)"),
        ("meta", "PVE itself (it is read-only)"),
        ("lock", "PVE itself (it is PVE-managed)"),
        ("start", "spec.state"),
    ];
    if let Some((_, f)) = fixed.iter().find(|(key, _)| *key == k) {
        return Some(f);
    }
    if syntax::is_disk_key(k) {
        return Some("spec.disks (or spec.hardware.cdrom / cloud-init)");
    }
    match syntax::split_slot(k) {
        Some(("net", _)) => Some("spec.networks"),
        Some(("hostpci", _)) => Some("spec.hardware.pci-devices"),
        Some(("ipconfig", _)) => Some("spec.cloud-init-data.ipconfigs"),
        _ => None,
    }
}
