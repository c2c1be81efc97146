//! Containers: what PVE refuses, and with which words: schema errors, templates and storages,
//! read-only, required and root-only options, protection.

use serde_json::Value;

use super::{CT, TEMPLATE, cluster};
use crate::tests::{P, T};

#[tokio::test]
async fn schema_refusals_come_with_pves_errors() {
    let t = T::with(cluster()).await;
    // (method, path, params, the parameter in error, a fragment of its message)
    type Case<'a> = (&'a str, &'a str, P<'a>, &'a str, &'a str);
    let create = "/nodes/pve01/lxc";
    let cases: &[Case] = &[
        (
            "POST",
            create,
            &[("vmid", "200"), ("ostemplate", TEMPLATE), ("bogus", "1")],
            "bogus",
            "property is not defined in schema and the schema does not allow additional properties",
        ),
        (
            "POST",
            create,
            &[("vmid", "200")],
            "ostemplate",
            "property is missing and it is not optional",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("hostname", "-bad"),
            ],
            "hostname",
            "invalid format - value does not look like a valid DNS name",
        ),
        (
            "POST",
            create,
            &[("vmid", "200"), ("ostemplate", TEMPLATE), ("memory", "8")],
            "memory",
            "value must have a minimum value of 16",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("net0", "name=eth0,bridge=vmbr0,tag=0"),
            ],
            "net0",
            "net0.tag: value must have a minimum value of 1",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("net0", "bridge=vmbr0"),
            ],
            "net0",
            "net0.name: property is missing and it is not optional",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("mp0", "local-lvm:1"),
            ],
            "mp0",
            "mp0.mp: property is missing and it is not optional",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("password", "abc"),
            ],
            "password",
            "value must be at least 5 characters long",
        ),
        (
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("unprivileged", "yes"),
            ],
            "unprivileged",
            "type check ('boolean') failed - got 'yes'",
        ),
        (
            "PUT",
            "/nodes/pve01/lxc/200/config",
            &[("bogus", "1")],
            "bogus",
            "property is not defined in schema",
        ),
        (
            "PUT",
            "/nodes/pve01/lxc/200/config",
            &[("cores", "0")],
            "cores",
            "value must have a minimum value of 1",
        ),
        (
            "GET",
            "/nodes/pve01/lxc/42/config",
            &[],
            "vmid",
            "invalid format - value does not look like a valid VM ID",
        ),
        (
            "DELETE",
            "/nodes/pve01/lxc/200",
            &[("purge", "maybe")],
            "purge",
            "type check ('boolean') failed",
        ),
    ];
    for (method, path, params, key, fragment) in cases {
        let (status, body) = t.req(method, path, params).await;
        assert_eq!(status, 400, "{method} {path} {params:?}: {body}");
        assert_eq!(body["message"], "Parameter verification failed.\n");
        let got = body["errors"][key].as_str().unwrap_or("");
        assert!(got.contains(fragment), "{method} {path} {params:?}: {body}");
    }
    // Nothing was created by a refused request.
    assert!(
        t.sim.state_json()["lxc"]
            .as_object()
            .is_some_and(|m| m.is_empty())
    );
}

#[tokio::test]
async fn template_and_storage_refusals() {
    let t = T::with(cluster()).await;
    let create = "/nodes/pve01/lxc";
    type Case<'a> = (P<'a>, u16, &'a str);
    let cases: &[Case] = &[
        (
            &[
                ("vmid", "200"),
                ("ostemplate", "local:iso/debian.iso"),
                ("rootfs", "local-lvm:1"),
            ],
            500,
            "unable to use volume local:iso/debian.iso - content type needs to be 'vztmpl'",
        ),
        (
            &[
                ("vmid", "200"),
                ("ostemplate", "/tmp/root.tar.gz"),
                ("rootfs", "local-lvm:1"),
            ],
            500,
            "Only root can pass arbitrary filesystem paths.",
        ),
        (
            &[("vmid", "200"), ("ostemplate", TEMPLATE)],
            400,
            "storage 'local' does not support container directories",
        ),
        (
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local:1"),
            ],
            400,
            "storage 'local' does not support container directories",
        ),
        (
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("mp0", "local-lvm:1,mp=/a"),
            ],
            500,
            "mount points configured, but 'rootfs' not set - aborting",
        ),
        (
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "nope:1"),
            ],
            500,
            "storage 'nope' does not exist",
        ),
        (
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("restore", "1"),
            ],
            500,
            "not modelled by the simulator",
        ),
    ];
    for (params, status, fragment) in cases {
        t.check("POST", create, params, *status, fragment).await;
    }
    // A template that is not on the storage fails the task, which cleans up after itself.
    let upid = t
        .upid(
            "POST",
            create,
            &[
                ("vmid", "200"),
                ("ostemplate", "local:vztmpl/missing.tar.zst"),
                ("rootfs", "local-lvm:1"),
            ],
        )
        .await;
    assert!(upid.contains(":vzcreate:200:"), "{upid}");
    assert_eq!(
        t.wait(&upid).await,
        "unable to create CT 200 - volume 'local:vztmpl/missing.tar.zst' does not exist"
    );
    assert_eq!(t.ct_state(200), Value::Null);
    assert!(t.volids().iter().all(|v| !v.contains("vm-200-")));
}

#[tokio::test]
async fn read_only_required_and_root_only_options_are_refused() {
    let t = T::with(cluster()).await;
    t.create_ct(200, &[("rootfs", "local-lvm:1"), ("features", "nesting=1")])
        .await;
    let config = format!("{CT}/config");
    type Case<'a> = (&'a str, P<'a>, u16, &'a str);
    let cases: &[Case] = &[
        (
            &config,
            &[("unprivileged", "0")],
            500,
            "unable to modify read-only option: 'unprivileged'",
        ),
        (
            &config,
            &[("delete", "unprivileged")],
            500,
            "unable to delete read-only option: 'unprivileged'",
        ),
        (
            &config,
            &[("delete", "memory")],
            500,
            "unable to delete required option 'memory'",
        ),
        (
            &config,
            &[("delete", "bogus")],
            400,
            "unknown option 'bogus'",
        ),
        (
            &config,
            &[("delete", "cores"), ("cores", "2")],
            400,
            "you can't use '-cores' and -delete cores' at the same time",
        ),
        // Bind mounts, device passthrough and feature flags other than nesting are root@pam's, never a token's.
        (
            &config,
            &[("mp0", "/srv/data,mp=/data")],
            403,
            "Permission check failed (mount point type bind is only allowed for root@pam)",
        ),
        (
            &config,
            &[("features", "nesting=1,keyctl=1")],
            403,
            "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)",
        ),
        (
            "/nodes/pve01/lxc",
            &[
                ("vmid", "201"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("mp0", "/srv/data,mp=/data"),
            ],
            403,
            "mount point type bind is only allowed for root@pam",
        ),
        (
            "/nodes/pve01/lxc",
            &[
                ("vmid", "201"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("features", "nesting=1"),
                ("unprivileged", "0"),
            ],
            403,
            "changing feature flags for privileged container is only allowed for root@pam",
        ),
    ];
    for (path, params, status, fragment) in cases {
        let method = if path.ends_with("/config") {
            "PUT"
        } else {
            "POST"
        };
        t.check(method, path, params, *status, fragment).await;
    }
    // Nothing of the refused writes reached the config.
    let c = t.ct_config(200, &[]).await;
    assert_eq!(c["unprivileged"], 1);
    assert_eq!(c["features"], "nesting=1");
    assert!(c.get("mp0").is_none());
    assert_eq!(t.ct_state(201), Value::Null);
}

#[tokio::test]
async fn protection_refuses_destroy_and_mount_point_changes() {
    let t = T::with(cluster()).await;
    t.create_ct(
        200,
        &[
            ("rootfs", "local-lvm:1"),
            ("mp0", "local-lvm:1,mp=/a"),
            ("protection", "1"),
        ],
    )
    .await;
    let cases: &[(&str, &str, P<'_>, &str)] = &[
        (
            "DELETE",
            CT,
            &[],
            "can't remove CT 200 - protection mode enabled",
        ),
        (
            "PUT",
            "/nodes/pve01/lxc/200/config",
            &[("mp0", "local-lvm:2,mp=/a")],
            "can't update CT 200 drive 'mp0' - protection mode enabled",
        ),
        (
            "PUT",
            "/nodes/pve01/lxc/200/config",
            &[("delete", "mp0")],
            "can't remove CT 200 drive 'mp0' - protection mode enabled",
        ),
    ];
    for (method, path, params, fragment) in cases {
        t.check(method, path, params, 500, fragment).await;
    }
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("protection", "0")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.task("DELETE", CT, &[]).await, "OK");
    assert_eq!(t.ct_state(200), Value::Null);
}
