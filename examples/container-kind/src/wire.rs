//! What this kind writes to PVE: the create-form values of volumes, mount points and NICs, and
//! the printing order PVE uses for them (volume first, then the required key — `mp` of a mount
//! point, `name` of a NIC — then the other keys sorted), so that what proxops writes is what
//! PVE prints back.

use proxops_kind_sdk::propstring::{PropString, print_bool};
use proxops_kind_sdk::size;

use crate::desired::*;

/// `<storage>:<GiB>`: the form in which PVE allocates a new container volume.
pub fn new_volume(storage: &str, size_bytes: u64) -> String {
    format!("{storage}:{}", size_bytes / size::GIB)
}

/// Print a property string with its bare value first, then `first` (when present), then the
/// other keys sorted.
pub fn print_ordered(p: &PropString, first: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(b) = &p.bare {
        parts.push(b.clone());
    }
    if let Some(v) = p.get(first) {
        parts.push(format!("{first}={v}"));
    }
    let mut rest: Vec<&(String, String)> = p.items.iter().filter(|(k, _)| k != first).collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    parts.extend(rest.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(",")
}

/// The create form of a mount point (`local-lvm:4,mp=/data,backup=1` or `/srv/data,mp=/data`).
pub fn new_mount_point(m: &MountPoint) -> String {
    let mut p = PropString::with_bare(match &m.source {
        MountSource::Volume {
            storage,
            size_bytes,
        } => new_volume(storage, *size_bytes),
        MountSource::Bind { host_path } => host_path.clone(),
    });
    p.set("mp", m.path.clone());
    if let Some(b) = m.backup {
        p.set("backup", print_bool(b));
    }
    if let Some(ro) = m.read_only {
        p.set("ro", print_bool(ro));
    }
    print_ordered(&p, "mp")
}

/// The NIC tokens the manifest owns, as `(key, value)`; `hwaddr` only when pinned.
pub fn nic_tokens(n: &Nic) -> Vec<(&'static str, String)> {
    let mut out = vec![("name", n.name.clone()), ("bridge", n.bridge.clone())];
    if let Some(fw) = n.firewall {
        out.push(("firewall", print_bool(fw).into()));
    }
    if let Some(gw) = &n.gw {
        out.push(("gw", gw.clone()));
    }
    if let Some(mac) = &n.mac {
        out.push(("hwaddr", mac.clone()));
    }
    if let Some(ip) = &n.ip {
        out.push(("ip", ip.clone()));
    }
    if let Some(tag) = n.vlan {
        out.push(("tag", tag.to_string()));
    }
    out
}

/// The create form of a NIC (`name=eth0,bridge=vmbr0,ip=dhcp,type=veth`).
pub fn new_nic(n: &Nic) -> String {
    let mut p = PropString::new();
    for (k, v) in nic_tokens(n) {
        p.set(k, v);
    }
    p.set("type", "veth");
    print_ordered(&p, "name")
}

/// The `features` value for the owned tokens on top of `live` (unowned tokens such as
/// `mount=` or `mknod=` are kept).
pub fn features(f: &Features, live: Option<&PropString>) -> String {
    let mut p = live.cloned().unwrap_or_default();
    for (k, v) in f.tokens() {
        p.set(k, print_bool(v));
    }
    p.canonical()
}

/// The `tags` value: the tags joined with `;`, as PVE prints them.
pub fn tags(tags: &[String]) -> String {
    tags.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_forms() {
        let mp = MountPoint {
            slot: 0,
            source: MountSource::Volume {
                storage: "local-lvm".into(),
                size_bytes: 4 * size::GIB,
            },
            path: "/data".into(),
            read_only: Some(false),
            backup: Some(true),
        };
        assert_eq!(new_mount_point(&mp), "local-lvm:4,mp=/data,backup=1,ro=0");
        let bind = MountPoint {
            source: MountSource::Bind {
                host_path: "/srv/media".into(),
            },
            read_only: Some(true),
            backup: None,
            ..mp
        };
        assert_eq!(new_mount_point(&bind), "/srv/media,mp=/data,ro=1");
        let nic = Nic {
            slot: 0,
            name: "eth0".into(),
            bridge: "vmbr0".into(),
            ip: Some("10.0.0.5/24".into()),
            gw: Some("10.0.0.1".into()),
            firewall: Some(true),
            vlan: Some(20),
            mac: None,
        };
        assert_eq!(
            new_nic(&nic),
            "name=eth0,bridge=vmbr0,firewall=1,gw=10.0.0.1,ip=10.0.0.5/24,tag=20,type=veth"
        );
        let live = PropString::parse("mount=nfs;cifs,nesting=0").unwrap();
        let f = Features {
            nesting: Some(true),
            keyctl: Some(true),
            fuse: None,
        };
        assert_eq!(
            features(&f, Some(&live)),
            "keyctl=1,mount=nfs;cifs,nesting=1"
        );
        assert_eq!(features(&f, None), "keyctl=1,nesting=1");
    }
}
