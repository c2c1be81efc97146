//! Capabilities: a guest write's parameters read as PVE parses them.

use super::*;

/// The capabilities a write's parameters use, or the rule that refuses them.
fn caps(method: Method, path: &str, pairs: &[(&str, &str)], expected: Result<&[Capability], Rule>) {
    let t = target(path, pairs).expect("a target");
    let got = capabilities_used(method, &t, &params(pairs)).map_err(|r| r.rule);
    assert_eq!(got.as_deref().map_err(|r| *r), expected, "{path} {pairs:?}");
}

#[test]
fn capabilities_are_read_as_pve_parses_parameters() {
    use Capability::*;
    use Method::*;
    let create = "/nodes/pve01/lxc";
    let ct = "/nodes/pve01/lxc/101/config";
    let vm = "/nodes/pve01/qemu/100/config";
    let v = ("vmid", "101");
    caps(Post, create, &[v, ("unprivileged", "1")], Ok(&[]));
    caps(Post, create, &[v], Ok(&[Privileged]));
    caps(Post, create, &[v, ("unprivileged", "0")], Ok(&[Privileged]));
    caps(
        Post,
        create,
        &[v, ("unprivileged", " 1")],
        Ok(&[Privileged]),
    );
    caps(
        Post,
        create,
        &[v, ("unprivileged", "true")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("unprivileged", "1")], Ok(&[Privileged]));
    caps(Put, ct, &[("unprivileged", "0")], Ok(&[Privileged]));
    caps(
        Put,
        ct,
        &[("delete", "memory,unprivileged")],
        Ok(&[Privileged]),
    );
    caps(
        Put,
        ct,
        &[("delete", "memory;UNPRIVILEGED")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("revert", "unprivileged")], Ok(&[Privileged]));
    caps(Put, ct, &[("memory", "512")], Ok(&[]));
    caps(Put, ct, &[("mp0", "local-lvm:8,mp=/data")], Ok(&[]));
    caps(Put, ct, &[("mp0", "/srv,mp=/data")], Ok(&[BindMounts]));
    caps(
        Put,
        ct,
        &[("mp0", "mp=/data,volume=/srv")],
        Ok(&[BindMounts]),
    );
    caps(
        Put,
        ct,
        &[("MP0", "mp=/data,volume=/srv")],
        Ok(&[BindMounts]),
    );
    caps(
        Put,
        ct,
        &[("mp0", "local-lvm:8,volume=/srv,mp=/x")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("mp0", "volume=local-lvm:8,volume=/srv,mp=/x")],
        Err(Rule::Capability),
    );
    caps(Put, ct, &[("mp0", "srv,mp=/x")], Err(Rule::Capability));
    caps(Put, ct, &[("rootfs", "/")], Ok(&[BindMounts]));
    caps(
        Put,
        ct,
        &[("mp1", "/dev/sdb,mp=/mnt")],
        Ok(&[BindMounts, Devices]),
    );
    caps(Put, ct, &[("features", "nesting=1")], Ok(&[]));
    caps(
        Put,
        ct,
        &[("features", "nesting=1,keyctl=1")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("features", "mount=nfs")], Ok(&[Privileged]));
    caps(
        Put,
        ct,
        &[("features", "nesting=1,nesting=0")],
        Err(Rule::Capability),
    );
    caps(Put, ct, &[("dev0", "/dev/sda")], Ok(&[Devices]));
    caps(
        Put,
        ct,
        &[("lxc.apparmor.profile", "unconfined")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("delete", "lxc.apparmor.profile")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("hookscript", "local:snippets/x.pl")],
        Ok(&[Hookscript]),
    );
    caps(
        Put,
        ct,
        &[("whatever", "/etc/shadow")],
        Err(Rule::Capability),
    );
    caps(Post, vm, &[("serial0", "socket")], Ok(&[]));
    caps(Post, vm, &[("serial0", "/dev/ttyS0")], Ok(&[Devices]));
    caps(Post, vm, &[("parallel0", "/dev/parport0")], Ok(&[Devices]));
    caps(Post, vm, &[("hostpci0", "mapping=gpu")], Ok(&[Devices]));
    caps(Post, vm, &[("usb0", "host=1234:5678")], Ok(&[Devices]));
    caps(Post, vm, &[("scsi1", "/dev/sdb")], Ok(&[Devices]));
    caps(
        Post,
        vm,
        &[("scsi1", "file=/dev/sdb,size=8G")],
        Ok(&[Devices]),
    );
    caps(
        Post,
        vm,
        &[("virtio0", "local-lvm:8,import-from=/var/lib/x.qcow2")],
        Ok(&[Devices]),
    );
    caps(
        Post,
        vm,
        &[("scsi1", "local-lvm:8,file=/dev/sdb")],
        Err(Rule::Capability),
    );
    caps(
        Post,
        vm,
        &[("scsi1", "local-lvm:vm-100-disk-1,size=8G")],
        Ok(&[]),
    );
    caps(Post, vm, &[("args", "-device x")], Err(Rule::Capability));
    caps(
        Post,
        vm,
        &[("memory", "2048"), ("description", "a /path inside")],
        Ok(&[]),
    );
}
