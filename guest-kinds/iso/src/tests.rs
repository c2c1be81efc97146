//! What differs for ISOs: `content=iso`, decompression, `.iso`/`.img` names and CD-ROM
//! referrers. The shared observe/plan rules are tested in the DiskImage crate.

use proxops_kind_download::{self as download, Referrer};
use proxops_kind_sdk::model::{Call, Observation, Read};
use serde_json::{Value, json};

use proxops_kind_sdk::wit::Guest;

/// The exported component type.
type Kind = proxops_kind_download::Iso;

fn manifest(spec: Value) -> String {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "ISO", "metadata": {"name": "debian-13"}, "spec": spec}).to_string()
}

fn cdrom(kind: &str, name: &str, node: &str) -> Referrer {
    Referrer {
        kind: kind.into(),
        name: name.into(),
        path: "spec.hardware.cdrom.iso".into(),
        desired: json!({"kind": kind, "name": name, "node": node}).to_string(),
    }
}

/// Answer every read: the storage list holds `local` (iso content), the listing holds `files`.
fn answer(calls: &[Call], files: &[(&str, u64)]) -> Observation {
    let reads = calls
        .iter()
        .map(|call| {
            let body = if call.path.ends_with("/storage") {
                json!([{"storage": "local", "type": "dir", "content": "iso,vztmpl,import", "active": 1, "enabled": 1, "shared": 0}])
            } else {
                assert_eq!(call.get("content"), Some("iso"));
                Value::Array(files.iter().map(|(v, s)| json!({"volid": v, "format": "iso", "size": s, "content": "iso"})).collect())
            };
            Read { call: call.clone(), status: 200, body: body.to_string() }
        })
        .collect();
    Observation { live: None, reads }
}

#[test]
fn compressed_iso_is_downloaded_and_decompressed_per_node() {
    let v = Kind::validate(manifest(json!({"storage": "local", "url": "https://h/debian-13.0.0-amd64-netinst.iso.zst", "compression": "zst",
        "checksum": "0".repeat(128), "checksum-algorithm": "sha512"})))
    .unwrap();
    let d: download::DownloadDesired = serde_json::from_str(&v.desired).unwrap();
    assert_eq!(
        (d.filename.as_str(), d.volid.as_str(), d.content.as_str()),
        (
            "debian-13.0.0-amd64-netinst.iso",
            "local:iso/debian-13.0.0-amd64-netinst.iso",
            "iso"
        )
    );
    let refs = [
        cdrom("VM", "installer", "pve02"),
        cdrom("TemplateVM", "base", "pve01"),
    ];
    let calls = download::observe(&d, &refs);
    let paths: Vec<String> = calls.iter().map(|c| c.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/nodes/pve01/storage",
            "/nodes/pve01/storage/local/content",
            "/nodes/pve02/storage",
            "/nodes/pve02/storage/local/content"
        ]
    );
    let p = download::plan(
        &d,
        &refs,
        &answer(
            &calls,
            &[("local:iso/debian-13.0.0-amd64-netinst.iso", 700)],
        ),
    )
    .unwrap();
    // Present on both nodes: nothing to do.
    assert!(p.actions.is_empty(), "{p:?}");
    let p = download::plan(&d, &refs, &answer(&calls, &[])).unwrap();
    let summaries: Vec<&str> = p.actions.iter().map(|a| a.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "download ISO debian-13 to local:iso/debian-13.0.0-amd64-netinst.iso on pve01",
            "download ISO debian-13 to local:iso/debian-13.0.0-amd64-netinst.iso on pve02"
        ]
    );
    let params: Vec<(&str, &str)> = p.actions[1].calls[0]
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(
        params,
        [
            ("url", "https://h/debian-13.0.0-amd64-netinst.iso.zst"),
            ("content", "iso"),
            ("filename", "debian-13.0.0-amd64-netinst.iso"),
            ("checksum", "0".repeat(128).as_str()),
            ("checksum-algorithm", "sha512"),
            ("verify-certificates", "1"),
            ("compression", "zst"),
        ]
    );
}

#[test]
fn iso_size_drift_names_the_vms_that_use_it() {
    let v = Kind::validate(manifest(
        json!({"nodes": ["pve01"], "storage": "local", "url": "https://h/boot.img", "size": 1024}),
    ))
    .unwrap();
    assert_eq!(v.warnings.len(), 1, "missing checksum warns");
    let d: download::DownloadDesired = serde_json::from_str(&v.desired).unwrap();
    let refs = [cdrom("VM", "rescue", "pve01")];
    let calls = download::observe(&d, &refs);
    let p = download::plan(&d, &refs, &answer(&calls, &[("local:iso/boot.img", 2048)])).unwrap();
    assert!(p.actions.is_empty());
    assert_eq!(p.anomalies.len(), 1);
    assert_eq!(
        p.anomalies[0].message,
        "local:iso/boot.img on pve01 is 2048 bytes but spec.size records 1024; proxops never replaces a present file (referenced by VM `rescue`). If this file is the right one, set spec.size to 2048; otherwise set a new spec.filename to download the new file next to it, or check that no VM uses it, delete it by hand (`pvesm free local:iso/boot.img` on pve01) and apply again"
    );
}

#[test]
fn component_functions() {
    let info = Kind::describe();
    assert_eq!((info.kind.as_str(), info.folder.as_str()), ("ISO", "iso"));
    let schema: Value = serde_json::from_str(&info.schema).unwrap();
    assert_eq!(
        schema["properties"]["spec"]["properties"]["compression"]["enum"],
        json!(["gz", "lzo", "zst", "bz2"])
    );
    let v = Kind::validate(manifest(json!({"storage": "local", "url": "https://h/x.ISO", "checksum": "0".repeat(40), "checksum-algorithm": "sha1"}))).unwrap();
    let key = Kind::identity(v.desired);
    assert_eq!(
        (key.node, key.space.as_str(), key.key.as_str()),
        (None, "storage-volume", "local:iso/x.ISO")
    );
    assert!(
        Kind::validate(manifest(
            json!({"storage": "local", "url": "https://h/x.qcow2"})
        ))
        .is_err()
    );
    assert!(!Kind::claims("/cluster/resources".into(), "{}".into()));
}
