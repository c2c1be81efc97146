//! PVE's parameter validation, case by case: formats, ranges, required keys and the messages
//! PVE answers them with.

use super::T;

const VM: &str = "/nodes/pve01/qemu/100";

#[tokio::test]
async fn validation_cases() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("virtio0", "local-lvm:1,ssd=1")],
            "virtio0.ssd: property is not defined in schema",
        ),
        (
            &[("net0", "virtio,bridge=vmbr0,tag=0")],
            "net0.tag: value must have a minimum value of 1",
        ),
        (
            &[("net0", "virtio,bridge=vmbr0,tag=4095")],
            "net0.tag: value must have a maximum value of 4094",
        ),
        (
            &[("net0", "virtio,bridge=vmbr0,vlan=5")],
            "net0.vlan: property is not defined in schema",
        ),
        (
            &[("sshkeys", "ssh-rsa AAAA me@host")],
            "invalid urlencoded string",
        ),
        (
            &[("onboot", "true")],
            "type check ('boolean') failed - got 'true'",
        ),
        (&[("cores", "x")], "type check ('integer') failed - got 'x'"),
        (
            &[("ostype", "dos")],
            "does not have a value in the enumeration",
        ),
        (
            &[("foo", "1")],
            "property is not defined in schema and the schema does not allow additional properties",
        ),
        (&[("meta", "x")], "property is not defined in schema"),
        (
            &[("efidisk0", "local-lvm:1,efitype=3m")],
            "efidisk0.efitype",
        ),
        (
            &[("tpmstate0", "local-lvm:1,version=v3")],
            "tpmstate0.version",
        ),
        (
            &[("hostpci0", "zz:00")],
            "hostpci0.host: value does not match the regex pattern",
        ),
        (
            &[("ipconfig0", "ip=dhcp,gw=10.0.0.1")],
            "gateways are only supported with an explicit IP address",
        ),
        (&[("ipconfig0", "ip=10.0.0.300/24")], "ipconfig0.ip"),
        (&[("boot", "order=scsi0;bogus")], "boot.order"),
        (&[("tags", "bad!tag")], "invalid characters in tag"),
        (&[("scsi31", "local-lvm:1")], "scsi31"),
        (&[("net0", "virtio=01:00:00:00:00:01")], "unicast MAC"),
    ];
    for (params, fragment) in cases {
        t.check("PUT", &format!("{VM}/config"), params, 400, fragment)
            .await;
    }
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[],
        500,
        "no options specified",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("delete", "foo")],
        400,
        "unknown option 'foo'",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "a"), ("delete", "name")],
        400,
        "at the same time",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("boot", "order=scsi0")],
        400,
        "invalid bootorder: device 'scsi0' does not exist",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("hostpci0", "0000:01:00.0,pcie=1")],
        500,
        "only root can set 'hostpci0' config for non-mapped devices",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("skiplock", "1"), ("name", "x")],
        400,
        "Only root may use this option.",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("ide2", "local:iso/x.iso")],
        400,
        "explicit 'media=cdrom' is required for iso images",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("virtio1", "none,media=cdrom")],
        400,
        "unable to parse drive options",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[
            ("scsi1", "local-lvm:1,ssd=1"),
            ("net0", "virtio,bridge=vmbr0,tag=100"),
        ],
        200,
        "null",
    )
    .await;
    t.check(
        "GET",
        "/nodes/pve01/qemu/abc/config",
        &[],
        400,
        "type check ('integer') failed - got 'abc'",
    )
    .await;
    t.check(
        "GET",
        "/nodes/pve01/qemu/99/config",
        &[],
        400,
        // The format is checked before the range (JSONSchema.pm).
        "invalid format - value does not look like a valid VM ID",
    )
    .await;
    t.check(
        "POST",
        "/nodes/pve01/qemu",
        &[],
        400,
        "property is missing and it is not optional",
    )
    .await;
    t.check(
        "POST",
        "/nodes/pve01/qemu",
        &[("vmid", "100")],
        500,
        "unable to create VM 100 - VM 100 already exists on node 'pve01'",
    )
    .await;
}
