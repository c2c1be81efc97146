//! QEMU guests: create, config (GET/POST/PUT, pending), clone, template, power, resize and destroy, with PVE's locks and tasks.

mod clone;
mod config;
mod create;
mod destroy;
mod drives;
mod power;
mod read;
mod resize;
mod template;

pub(crate) use clone::clone_vm;
pub(crate) use config::{unlink, update_config_async, update_config_sync};
pub(crate) use create::create;
pub(crate) use destroy::destroy;
pub(crate) use power::{ha_request, power};
pub(crate) use read::{
    agent_ping, get_config, index, list, pending, pending_rows, snapshot_list, status_current,
    status_index, typed_config,
};
pub(crate) use resize::resize;
pub(crate) use template::template;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{ApiError, Req, no_such_vm};
use crate::formats::{normalize_tags, print_property_string};
use crate::schema::{find_property, parameters, parse_property_string, split_indexed};
use crate::sim::Sim;
use crate::state::{State, Vm};
use drives::{is_drive_key, parse_drive, print_drive};

const CONFIG_PATH: &str = "/nodes/{node}/qemu/{vmid}/config";

/// PVE's `assert_if_modified` / update_vm text for a stale `digest`.
const CHECKSUM_MISMATCH: &str = "checksum mismatch (file change by other user?)";

/// Keys PVE applies at once even on a running VM (QemuServer.pm fast-plug list plus cloud-init keys).
const FAST_PLUG: &[&str] = &[
    "description",
    "hookscript",
    "lock",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "protection",
    "shares",
    "startup",
    "tags",
    "vmstatestorage",
    "ciuser",
    "cipassword",
    "citype",
    "ciupgrade",
    "cicustom",
    "searchdomain",
    "nameserver",
    "sshkeys",
];

/// Create parameters that are not config keys.
const CREATE_ONLY: &[&str] = &[
    "vmid",
    "node",
    "start",
    "storage",
    "pool",
    "archive",
    "force",
    "unique",
    "live-restore",
    "bwlimit",
    "ha-managed",
    "import-working-storage",
];

/// Config-update parameters that are not config keys.
const UPDATE_ONLY: &[&str] = &[
    "vmid",
    "node",
    "delete",
    "revert",
    "force",
    "digest",
    "skiplock",
    "background_delay",
    "import-working-storage",
];

fn is_fast_plug(key: &str) -> bool {
    FAST_PLUG.contains(&key) || split_indexed(key).is_some_and(|(f, _)| f == "ipconfig")
}

fn hash_password(st: &mut State, value: &str) -> String {
    if ["$1$", "$5$", "$6$", "$2a$", "$2y$"]
        .iter()
        .any(|p| value.starts_with(p))
    {
        return value.to_string();
    }
    use sha2::Digest;
    let salt = st.random_uuid().replace('-', "");
    let salt = &salt[..16];
    let digest = sha2::Sha256::digest(format!("{salt}{value}").as_bytes());
    format!("${}${salt}${}", 5, hex::encode(digest))
}

/// Normalises a value the way PVE does on write (net MAC generation, tags, vmgenid, drive re-printing, cipassword hashing).
fn prepare_value(st: &mut State, key: &str, value: &str, ostype: Option<&str>) -> String {
    if split_indexed(key).is_some_and(|(f, _)| f == "net") {
        let Some(fmt) = find_property(parameters("POST", CONFIG_PATH).expect("schema"), key)
            .and_then(|s| s.get("format"))
            .and_then(Value::as_object)
        else {
            return value.to_string();
        };
        let Ok(mut map) = parse_property_string(fmt, value, key) else {
            return value.to_string();
        };
        let model = map.remove("model").unwrap_or_else(|| "virtio".into());
        // A given MAC is kept as written (qemu-server `parse_net`/`print_net` do not change its case); a
        // generated one is upper case (pve-common `random_ether_addr`).
        let mac = match map.remove("macaddr") {
            Some(m) => m,
            None => st.random_mac(),
        };
        let rest = print_property_string(None, &map);
        return if rest.is_empty() {
            format!("{model}={mac}")
        } else {
            format!("{model}={mac},{rest}")
        };
    }
    if is_drive_key(key) {
        return match parse_drive(key, value) {
            Some(map) => print_drive(&map),
            None => value.to_string(),
        };
    }
    match key {
        "tags" => normalize_tags(value),
        "vmgenid" if value == "1" => st.random_uuid(),
        // The config file keeps no trailing whitespace of a description (qemu-server
        // `write_vm_config`: `s/\s+$//`).
        "description" => value.trim_end().to_string(),
        // cgroup v2 (PVE 9) clamps CPU weights to 1..10000 (pve-common `CGroup::clamp_cpu_shares`).
        "cpuunits" => match value.parse::<u64>() {
            Ok(n) if n > 10_000 => "10000".to_string(),
            _ => value.to_string(),
        },
        "cipassword" => {
            if ostype.is_some_and(|o| o.starts_with('w')) {
                value.to_string()
            } else {
                hash_password(st, value)
            }
        }
        _ => value.to_string(),
    }
}

/// Checks that every `boot: order=` device exists in `conf`.
fn check_boot(conf: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let Some(boot) = conf.get("boot") else {
        return Ok(());
    };
    if let Some(order) = boot.split(',').find_map(|p| p.strip_prefix("order=")) {
        for dev in order.split(';').filter(|d| !d.is_empty()) {
            if !conf.contains_key(dev) {
                return Err(ApiError::param(
                    "boot",
                    format!("invalid bootorder: device '{dev}' does not exist'"),
                ));
            }
        }
    }
    Ok(())
}

/// PVE's `check_hostpci_perm`: only the literal `root@pam` may pass a raw host device (`host=`) or a `romfile`;
/// anyone else needs a `mapping` (an API token's auth id is `user@realm!id`, never `root@pam`).
fn check_hostpci(user: &str, key: &str, value: &str) -> Result<(), ApiError> {
    if split_indexed(key).is_none_or(|(f, _)| f != "hostpci") || user == "root@pam" {
        return Ok(());
    }
    let Some(device) = crate::schema::parse_named("pve-qm-hostpci", value, key) else {
        return Ok(());
    };
    if device.contains_key("host") {
        return Err(ApiError::die(format!(
            "only root can set '{key}' config for non-mapped devices"
        )));
    }
    if !device.contains_key("mapping") {
        return Err(ApiError::die("either 'host' or 'mapping' must be set."));
    }
    if device.contains_key("romfile") {
        return Err(ApiError::param(
            key,
            "only root@pam can set 'romfile' option",
        ));
    }
    Ok(())
}

/// The config keys qemu-server's `$check_vm_modify_config_perm` grants through a VM privilege (its `$cpuoptions`,
/// `$memoryoptions`, `$hwtypeoptions`, `$generaloptions`, `$vmpoweroptions`, `$diskoptions` and
/// `$cloudinitoptions`, plus `vmstate` and `running-nets-host-mtu`); the `numaN`, `netN` and `ipconfigN` families
/// are granted as well.
const PRIVILEGED_KEYS: &[&str] = &[
    // VM.Config.CPU
    "cores",
    "cpu",
    "runningcpu",
    "cpulimit",
    "cpuunits",
    "numa",
    "smp",
    "sockets",
    "vcpus",
    // VM.Config.Memory
    "memory",
    "balloon",
    "shares",
    "allow-ksm",
    // VM.Config.HWType
    "acpi",
    "hotplug",
    "kvm",
    "machine",
    "runningmachine",
    "scsihw",
    "smbios1",
    "tablet",
    "vga",
    "watchdog",
    "audio0",
    "rng0",
    // VM.Config.Options
    "agent",
    "autostart",
    "bios",
    "description",
    "keyboard",
    "localtime",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "ostype",
    "protection",
    "reboot",
    "startdate",
    "startup",
    "tdf",
    "template",
    // VM.PowerMgmt
    "freeze",
    // VM.Config.Disk
    "boot",
    "bootdisk",
    "vmstatestorage",
    // VM.Config.Network
    "running-nets-host-mtu",
    // VM.Config.Cloudinit
    "cicustom",
    "cipassword",
    "citype",
    "ciuser",
    "ciupgrade",
    "nameserver",
    "searchdomain",
    "sshkeys",
    // VM.Config.Disk and VM.PowerMgmt
    "vmstate",
];

/// Whether only root@pam may write or delete `key`: `$check_vm_modify_config_perm` skips drives, `cdrom`, `tags` and
/// the `unused`/`serial`/`usb`/`hostpci`/`virtiofs` families (checked by value elsewhere), grants
/// [`PRIVILEGED_KEYS`] and dies for everything else ("catches args, lock, etc."): `args`, `affinity`, `amd-sev`,
/// `arch`, `hookscript`, `hugepages`, `intel-tdx`, `ivshmem`, `keephugepages`, `lock`, `parallelN`,
/// `spice_enhancements` and `vmgenid` in PVE 9.2.
fn root_only_key(key: &str) -> bool {
    if is_drive_key(key) || key == "cdrom" || key == "tags" || PRIVILEGED_KEYS.contains(&key) {
        return false;
    }
    !split_indexed(key).is_some_and(|(f, _)| {
        matches!(
            f,
            "unused" | "serial" | "usb" | "hostpci" | "virtiofs" | "numa" | "net" | "ipconfig"
        )
    })
}

/// qemu-server's `$check_vm_modify_config_perm` on create and update (for the deleted keys, then the set ones),
/// before anything forks: anyone but the literal `root@pam` (every API token) gets `only root can set '<key>'
/// config`, for a delete too.
fn check_root_only<'a>(
    user: &str,
    keys: impl IntoIterator<Item = &'a str>,
) -> Result<(), ApiError> {
    if user == "root@pam" {
        return Ok(());
    }
    match keys.into_iter().find(|k| root_only_key(k)) {
        Some(key) => Err(ApiError::die(format!("only root can set '{key}' config"))),
        None => Ok(()),
    }
}

/// pve-guest-common's `check_hookscript`, which `update_vm_api` runs on a new `hookscript` (create does not):
/// the volume must be a snippet that exists; a failure is a 400 on `hookscript`. Whether the script is executable
/// is not modelled (a snippet the simulator holds is taken to be).
fn check_hookscript(sim: &Sim, st: &State, node: &str, volid: &str) -> Result<(), ApiError> {
    let fail = |msg: String| Err(ApiError::param("hookscript", format!("{msg}\n")));
    let Some((storage, volname)) = crate::formats::parse_volume_id(volid) else {
        return fail(format!("unable to parse volume ID '{volid}'"));
    };
    let Some(s) = sim.storage(storage) else {
        return fail(format!("storage '{storage}' does not exist"));
    };
    if !s.file_based() || !volname.starts_with("snippets/") {
        return fail(format!("'{volid}' is not in the snippets directory"));
    }
    if crate::storage::find_volume(sim, st, node, volid).is_none() {
        return fail(format!("script '{volid}' does not exist"));
    }
    Ok(())
}

/// The family of an indexed key (`serial` for `serial0`), `None` for other keys.
fn family(key: &str) -> Option<&str> {
    split_indexed(key).map(|(f, _)| f)
}

/// qemu-server's `check_usb_perm` for anyone but root@pam: a `spice` port or a `mapping` (its `Mapping.Use` is not
/// modelled); a host device is root's.
fn check_usb(user: &str, key: &str, value: &str) -> Result<(), ApiError> {
    if user == "root@pam" {
        return Ok(());
    }
    let Some(device) = config::parse_with_format(key, value) else {
        return Ok(());
    };
    match device.get("host") {
        Some(host) if host.eq_ignore_ascii_case("spice") => Ok(()),
        Some(_) => Err(ApiError::die(format!(
            "only root can set '{key}' config for real devices"
        ))),
        None if device.contains_key("mapping") => Ok(()),
        None => Err(ApiError::die("either 'host' or 'mapping' must be set.")),
    }
}

/// The device checks `create_vm` makes before it forks, after `$check_vm_modify_config_perm`: serial ports
/// (`$check_vm_create_serial_perm`: only a `socket` for anyone but root@pam), USB devices, then PCI devices.
fn check_create_devices(user: &str, params: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if user == "root@pam" {
        return Ok(());
    }
    for (key, value) in params {
        if family(key) == Some("serial") && value != "socket" {
            return Err(ApiError::die(format!(
                "only root can set '{key}' config for real devices"
            )));
        }
    }
    for (key, value) in params.iter().filter(|(k, _)| family(k) == Some("usb")) {
        check_usb(user, key, value)?;
    }
    for (key, value) in params {
        check_hostpci(user, key, value)?;
    }
    Ok(())
}

/// PVE's default boot order: first disk, first cdrom (cloud-init included), first NIC.
fn default_boot(conf: &BTreeMap<String, String>) -> Option<String> {
    let mut order: Vec<String> = Vec::new();
    let mut buses = Vec::new();
    for (family, max) in [("ide", 3), ("scsi", 30), ("virtio", 15), ("sata", 5)] {
        for i in 0..=max {
            buses.push(format!("{family}{i}"));
        }
    }
    for want_cdrom in [false, true] {
        for k in &buses {
            if let Some(v) = conf.get(k) {
                let cd = v.contains("media=cdrom") || v == "none" || v.starts_with("cdrom");
                if cd == want_cdrom {
                    order.push(k.clone());
                    break;
                }
            }
        }
    }
    if let Some(net) = conf
        .keys()
        .find(|k| split_indexed(k).is_some_and(|(f, _)| f == "net"))
    {
        order.push(net.clone());
    }
    if order.is_empty() {
        None
    } else {
        Some(format!("order={}", order.join(";")))
    }
}

fn get_vm<'a>(st: &'a State, node: &str, vmid: u32) -> Result<&'a Vm, ApiError> {
    st.vms
        .get(&vmid)
        .filter(|vm| vm.node == node)
        .ok_or_else(|| no_such_vm(node, vmid))
}

/// `skiplock` is for root@pam only (an API token never is).
pub(crate) fn check_skiplock(req: &Req) -> Result<(), ApiError> {
    if req.flag("skiplock") && req.user != "root@pam" {
        return Err(ApiError::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    Ok(())
}

/// `die "checksum mismatch ..."` when a `digest` was sent and the config changed since.
fn check_digest(vm: &Vm, digest: Option<&str>) -> Result<(), String> {
    match digest {
        Some(d) if d != vm.digest() => Err(CHECKSUM_MISMATCH.to_string()),
        _ => Ok(()),
    }
}

/// PVE's text for a guest whose config file is gone.
fn no_such_vm_text(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
}

fn check_lock(vm: &Vm, skiplock: bool) -> Result<(), String> {
    match vm.lock() {
        Some(l) if !skiplock => Err(format!("VM is locked ({l})")),
        _ => Ok(()),
    }
}

/// One volume a config refers to, as qemu-server's `foreach_volid` sees it.
#[derive(Debug, Clone)]
pub(crate) struct GuestVolume {
    pub key: String,
    pub volid: String,
    pub cdrom: bool,
    pub cloudinit: bool,
    pub unused: bool,
    pub size: Option<u64>,
}

/// The volumes of a VM config (drives, then `unusedN`), `none` and `cdrom` drives left out.
pub(crate) fn volumes(conf: &BTreeMap<String, String>) -> Vec<GuestVolume> {
    let mut out = Vec::new();
    for (key, value) in conf {
        if drives::is_unused_key(key) {
            out.push(GuestVolume {
                key: key.clone(),
                volid: value.clone(),
                cdrom: false,
                cloudinit: false,
                unused: true,
                size: None,
            });
            continue;
        }
        if !is_drive_key(key) {
            continue;
        }
        let Some(map) = parse_drive(key, value) else {
            continue;
        };
        let Some(file) = map.get("file") else {
            continue;
        };
        if file == "none" || file == "cdrom" {
            continue;
        }
        out.push(GuestVolume {
            key: key.clone(),
            volid: file.clone(),
            cdrom: drives::is_cdrom(&map),
            cloudinit: drives::is_cloudinit_file(file),
            unused: false,
            size: map.get("size").and_then(|s| crate::formats::parse_size(s)),
        });
    }
    out
}

/// The LRM's start of an HA-managed VM (`PVE::HA::Resources::PVEVM::start`): the start checks, pending values
/// applied, running.
pub(crate) fn ha_start(sim: &Sim, st: &mut State, vmid: u32) -> Result<(), String> {
    let Some(vm) = st.vms.get(&vmid) else {
        return Err(format!("VM {vmid} does not exist"));
    };
    if vm.running {
        return Ok(());
    }
    power::start_checks(sim, st, vm, vmid, false)?;
    config::apply_pending(sim, st, vmid);
    let pid = st.next_pid();
    if let Some(vm) = st.vms.get_mut(&vmid) {
        vm.running = true;
        vm.paused = false;
        vm.started_at = crate::state::now();
        vm.pid = pid;
    }
    Ok(())
}

/// The LRM's stop of an HA-managed VM.
pub(crate) fn ha_stop(sim: &Sim, st: &mut State, vmid: u32) {
    if st.vms.get(&vmid).is_some_and(|vm| vm.running) {
        config::apply_pending(sim, st, vmid);
        if let Some(vm) = st.vms.get_mut(&vmid) {
            vm.running = false;
            vm.paused = false;
            vm.started_at = 0;
            vm.pid = 0;
        }
    }
}
