//! PCI and USB resource mappings: CRUD on `/cluster/mapping/{pci,usb}[/{id}]` with PVE's checks and messages,
//! seeding from the cluster YAML, and guests using mappings made through the API.

use serde_json::json;

use super::T;
use crate::SimConfig;

const GPU0: &str = "node=pve01,path=0000:01:00.0,id=10de:2204,iommugroup=12";
const GPU1: &str = "node=pve02,path=0000:02:00.0,id=10de:2204,subsystem-id=1458:403b";

#[tokio::test]
async fn pci_mappings_are_created_read_updated_and_deleted() {
    let t = T::new().await;
    assert_eq!(t.get("/cluster/mapping/pci", &[]).await, json!([]));
    t.check(
        "POST",
        "/cluster/mapping/pci",
        &[
            ("id", "gpu"),
            ("map", GPU0),
            ("map", GPU1),
            ("description", "the GPUs"),
            ("mdev", "1"),
        ],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.sim.pci_mapping("gpu"),
        Some(vec![GPU0.to_string(), GPU1.to_string()])
    );
    let list = t.get("/cluster/mapping/pci", &[]).await;
    let digest = list[0]["digest"].as_str().expect("digest").to_string();
    assert_eq!(digest.len(), 40);
    assert_eq!(
        list,
        json!([{
            "id": "gpu", "type": "pci", "description": "the GPUs", "mdev": 1,
            "map": [GPU0, GPU1], "digest": digest,
        }])
    );
    // The single read has no `id` (PVE returns the section as it is, with the file's digest).
    assert_eq!(
        t.get("/cluster/mapping/pci/gpu", &[]).await,
        json!({"type": "pci", "description": "the GPUs", "mdev": 1, "map": [GPU0, GPU1], "digest": digest})
    );
    // An update gives `map` again (PVE's update runs the create's `check_config`), may delete options and must
    // match the digest when it gives one.
    t.check(
        "PUT",
        "/cluster/mapping/pci/gpu",
        &[
            ("map", GPU0),
            ("delete", "description,mdev"),
            ("live-migration-capable", "1"),
            ("digest", &digest),
        ],
        200,
        "null",
    )
    .await;
    let read = t.get("/cluster/mapping/pci/gpu", &[]).await;
    assert_eq!(read["map"], json!([GPU0]));
    assert_eq!(read["live-migration-capable"], 1);
    assert!(read.get("description").is_none() && read.get("mdev").is_none());
    assert_ne!(read["digest"], digest.as_str());
    let cases: &[(&str, &str, super::P, u16, &str)] = &[
        (
            "PUT",
            "/cluster/mapping/pci/gpu",
            &[("map", GPU0), ("digest", &digest)],
            500,
            "update hardware mapping failed: detected modified configuration - file changed by other user? Try again.\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/pci/gpu",
            &[("description", "x")],
            500,
            "update hardware mapping failed: missing value for required option 'map'\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/pci/nope",
            &[("map", GPU0)],
            500,
            "update hardware mapping failed: pci ID 'nope' does not exist\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/pci/gpu",
            &[("map", GPU0), ("delete", "map")],
            500,
            "update hardware mapping failed: unable to delete required option 'map'\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/pci/gpu",
            &[("map", GPU0), ("delete", "bogus")],
            500,
            "update hardware mapping failed: no such option 'bogus'\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/pci/gpu",
            &[("map", GPU0), ("mdev", "1"), ("delete", "mdev")],
            500,
            "update hardware mapping failed: cannot set and delete property 'mdev' at the same time!\\n",
        ),
        (
            "POST",
            "/cluster/mapping/pci",
            &[("id", "gpu"), ("map", GPU0)],
            500,
            "create hardware mapping failed: pci ID 'gpu' already defined\\n",
        ),
        // `map` is required: SectionConfig's create schema follows the plugin's options.
        (
            "POST",
            "/cluster/mapping/pci",
            &[("id", "gpu2")],
            400,
            "\"map\":\"property is missing and it is not optional\"",
        ),
        (
            "POST",
            "/cluster/mapping/pci",
            &[
                ("id", "gpu2"),
                ("map", "node=pve01,path=01:00.0,id=10de:2204"),
            ],
            400,
            "map[0].path: value does not match the regex pattern",
        ),
        (
            "POST",
            "/cluster/mapping/pci",
            &[
                ("id", "gpu2"),
                ("map", GPU0),
                ("map", "node=pve01,path=0000:01:00.0"),
            ],
            400,
            "map[1].id: property is missing and it is not optional",
        ),
        (
            "POST",
            "/cluster/mapping/pci",
            &[("id", "GPU"), ("map", GPU0)],
            400,
            "invalid configuration ID 'GPU'",
        ),
        (
            "GET",
            "/cluster/mapping/pci/nope",
            &[],
            500,
            "mapping 'nope' not found\\n",
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    // A delete of an unknown id is no error; the mapping goes.
    t.check("DELETE", "/cluster/mapping/pci/nope", &[], 200, "null")
        .await;
    t.check("DELETE", "/cluster/mapping/pci/gpu", &[], 200, "null")
        .await;
    assert_eq!(t.sim.pci_mapping("gpu"), None);
    assert_eq!(t.get("/cluster/mapping/pci", &[]).await, json!([]));
    assert!(t.sim.state_json().get("mappings").is_none());
}

#[tokio::test]
async fn usb_mappings_are_created_checked_per_node_updated_and_deleted() {
    let t = T::new().await;
    t.check(
        "POST",
        "/cluster/mapping/usb",
        &[
            ("id", "stick"),
            ("map", "node=pve01,id=0781:5583,path=1-2.3"),
        ],
        200,
        "null",
    )
    .await;
    let list = t.get("/cluster/mapping/usb", &[]).await;
    assert_eq!(list[0]["id"], "stick");
    assert_eq!(list[0]["type"], "usb");
    assert_eq!(
        list[0]["map"],
        json!(["node=pve01,id=0781:5583,path=1-2.3"])
    );
    // USB's index puts its diagnostics under `errors` (PCI's under `checks`).
    let checked = t
        .get("/cluster/mapping/usb", &[("check-node", "pve02")])
        .await;
    assert_eq!(
        checked[0]["errors"],
        json!([{"severity": "warning", "message": "No mapping for node pve02."}])
    );
    let checked = t
        .get("/cluster/mapping/usb", &[("check-node", "pve01")])
        .await;
    assert_eq!(checked[0]["errors"], json!([]));
    t.check(
        "GET",
        "/cluster/mapping/usb",
        &[("check-node", "nope")],
        500,
        "hostname lookup 'nope' failed",
    )
    .await;
    let cases: &[(&str, &str, super::P, u16, &str)] = &[
        // USB's API schema requires `map`.
        (
            "POST",
            "/cluster/mapping/usb",
            &[("id", "s2")],
            400,
            "property is missing and it is not optional",
        ),
        (
            "POST",
            "/cluster/mapping/usb",
            &[("id", "s2"), ("map", "node=pve01,id=0781:5583,path=usb1")],
            400,
            "map[0].path: value does not match the regex pattern",
        ),
        (
            "POST",
            "/cluster/mapping/usb",
            &[
                ("id", "s2"),
                ("map", "node=pve01,id=0781:5583"),
                ("mdev", "1"),
            ],
            400,
            "property is not defined in schema",
        ),
        (
            "POST",
            "/cluster/mapping/usb",
            &[("id", "stick"), ("map", "node=pve01,id=0781:5583")],
            500,
            "create hardware mapping failed: usb ID 'stick' already defined\\n",
        ),
        (
            "PUT",
            "/cluster/mapping/usb/nope",
            &[("map", "node=pve01,id=0781:5583")],
            500,
            "update hardware mapping failed: usb ID 'nope' does not exist\\n",
        ),
        (
            "GET",
            "/cluster/mapping/usb/nope",
            &[],
            500,
            "mapping 'nope' not found\\n",
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    t.check(
        "PUT",
        "/cluster/mapping/usb/stick",
        &[
            ("map", "node=pve01,id=0781:5583"),
            ("map", "node=pve02,id=0781:5583"),
            ("description", "a stick"),
        ],
        200,
        "null",
    )
    .await;
    let read = t.get("/cluster/mapping/usb/stick", &[]).await;
    assert_eq!(read["description"], "a stick");
    assert_eq!(t.sim.usb_mapping("stick").map(|m| m.len()), Some(2));
    t.check("DELETE", "/cluster/mapping/usb/stick", &[], 200, "null")
        .await;
    assert_eq!(t.sim.usb_mapping("stick"), None);
}

#[tokio::test]
async fn guests_use_mappings_made_through_the_api() {
    let t = T::new().await;
    const VM: &str = "/nodes/pve01/qemu/100";
    t.create(100, &[]).await;
    // An API token may attach mapped devices only; the names are resolved at start (`config_to_command`).
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("hostpci0", "mapping=gpu")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "PCI device mapping not found for 'gpu'"
    );
    t.check(
        "POST",
        "/cluster/mapping/pci",
        &[("id", "gpu"), ("map", GPU1)],
        200,
        "null",
    )
    .await;
    // An entry for another node does not do.
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "PCI device mapping not found for 'gpu'"
    );
    t.check(
        "PUT",
        "/cluster/mapping/pci/gpu",
        &[("map", GPU0), ("map", GPU1)],
        200,
        "null",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("usb0", "mapping=stick")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "USB device mapping not found for 'stick'"
    );
    t.check(
        "POST",
        "/cluster/mapping/usb",
        &[
            ("id", "stick"),
            ("map", "node=pve01,id=0781:5583"),
            ("map", "node=pve01,id=0781:5584"),
        ],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "More than one USB mapping per host not supported"
    );
    t.check(
        "PUT",
        "/cluster/mapping/usb/stick",
        &[("map", "node=pve01,id=0781:5583")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    assert_eq!(t.sim.vm_status(100).as_deref(), Some("running"));
    // The migration precondition sees the mappings: both are on pve01 only now.
    assert_eq!(
        t.task("POST", &format!("{VM}/status/stop"), &[]).await,
        "OK"
    );
    t.check(
        "PUT",
        "/cluster/mapping/pci/gpu",
        &[("map", GPU0)],
        200,
        "null",
    )
    .await;
    let pre = t.get(&format!("{VM}/migrate"), &[]).await;
    let blocked = pre["not_allowed_nodes"]["pve02"].to_string();
    assert!(
        blocked.contains("hostpci0") && blocked.contains("usb0"),
        "{pre}"
    );
}

#[tokio::test]
async fn mappings_are_seeded_from_the_cluster_yaml_and_kept_in_the_state() {
    let yaml = "pci_mappings:\n  - {id: gpu, description: the GPU, map: ['node=pve01,path=0000:01:00.0,id=10de:2204']}\nusb_mappings:\n  - {id: stick, map: ['node=pve01,id=0781:5583']}\n";
    let config = SimConfig::from_yaml_str(yaml).expect("yaml");
    assert_eq!(config.usb_mappings[0].id, "stick");
    let t = T::with(config).await;
    let pci = t.get("/cluster/mapping/pci", &[]).await;
    assert_eq!(pci[0]["id"], "gpu");
    assert_eq!(pci[0]["description"], "the GPU");
    let usb = t.get("/cluster/mapping/usb", &[]).await;
    assert_eq!(usb[0]["id"], "stick");
    // A seeded mapping has no description unless declared (PVE writes none).
    assert!(usb[0].get("description").is_none());
    let state = t.sim.state_json();
    assert_eq!(
        state["mappings"]["usb"]["stick"]["map"],
        json!(["node=pve01,id=0781:5583"])
    );
    assert!(SimConfig::from_yaml_str("usb_mappings:\n  - {id: x, map: [], bogus: 1}\n").is_err());
}
