use super::validate::*;
use super::*;

const UBUNTU: &str =
    "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img";
const SHA256: &str = "5c3ddb00f60bc455dac0862fabe9d8bacec46c33ac1751143c5c3683404b110d";
const NOCHECK: (&str, &str) = (
    "spec.checksum",
    "no checksum: PVE cannot verify the download; set checksum and checksum-algorithm",
);

/// Diagnostics as `(path, message)`.
type Pairs<'a> = &'a [(&'a str, &'a str)];

/// Validate `spec` as a `k` manifest named `img`; `Ok` holds the volid and the warnings,
/// `Err` every diagnostic, as `(path, message)`.
fn check(k: &DownloadKind, spec: Value, expected: Result<(&str, Pairs), Pairs>) {
    let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": k.kind, "metadata": {"name": "img"}, "spec": spec});
    let pairs = |ds: &[Diag]| -> Vec<(String, String)> {
        ds.iter()
            .map(|d| (d.path.clone(), d.message.clone()))
            .collect()
    };
    let owned = |xs: &[(&str, &str)]| -> Vec<(String, String)> {
        xs.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    match (validate(k, &doc), expected) {
        (Ok((d, w)), Ok((volid, warnings))) => {
            assert_eq!(d.volid, volid, "{spec}");
            assert_eq!(pairs(&w), owned(warnings), "{spec}");
        }
        (Err(diags), Err(want)) => assert_eq!(pairs(&diags), owned(want), "{spec}"),
        (got, want) => panic!("{spec}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn file_names_from_urls() {
    for (url, compression, want) in [
        (UBUNTU, None, "noble-server-cloudimg-amd64.img"),
        ("https://h/a/b.qcow2?x=1#f", None, "b.qcow2"),
        ("https://h/a/my%20disk+v1.raw", None, "my_20disk_v1.raw"),
        ("https://h/x.iso.gz", Some("gz"), "x.iso"),
        ("https://h/x.iso.zst", Some("gz"), "x.iso.zst"),
        ("https://h/dir/", None, ""),
        ("https://h", None, ""),
        ("https://h?a=/b.iso", None, ""),
    ] {
        assert_eq!(file_name_from_url(url, compression), want, "{url}");
    }
}

#[test]
fn valid_downloads() {
    check(
        &ISO,
        json!({"storage": "local", "url": UBUNTU}),
        Ok(("local:iso/noble-server-cloudimg-amd64.img", &[NOCHECK])),
    );
    check(
        &DISK_IMAGE,
        json!({"nodes": ["pve01", "pve02"], "storage": "local", "url": UBUNTU, "filename": "noble.qcow2",
            "checksum": SHA256.to_uppercase(), "checksum-algorithm": "sha256", "size": 614203392}),
        Ok(("local:import/noble.qcow2", &[])),
    );
    check(
        &DISK_IMAGE,
        json!({"storage": "nfs-images", "url": "https://h/debian-13-genericcloud-amd64.raw"}),
        Ok((
            "nfs-images:import/debian-13-genericcloud-amd64.raw",
            &[NOCHECK],
        )),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https://h/x/alpine-virt.ISO.gz", "compression": "gz",
            "checksum": "d41d8cd98f00b204e9800998ecf8427e", "checksum-algorithm": "md5"}),
        Ok(("local:iso/alpine-virt.ISO", &[])),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https://h/a%20b.iso"}),
        Ok(("local:iso/a_20b.iso", &[NOCHECK])),
    );
}

#[test]
fn file_name_rules() {
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": UBUNTU}),
        Err(&[
            (
                "spec.url",
                "the file name taken from the URL, `noble-server-cloudimg-amd64.img`, must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names); set spec.filename, e.g. `noble-server-cloudimg-amd64.qcow2` if the image is qcow2",
            ),
            NOCHECK,
        ]),
    );
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": UBUNTU, "filename": "appliance.ova", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.filename",
            "file name `appliance.ova` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
        )]),
    );
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": UBUNTU, "filename": "noble.QCOW2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.filename",
            "file name `noble.QCOW2` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
        )]),
    );
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": UBUNTU, "filename": "noble+v=1.qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.filename",
            "`noble+v=1.qcow2` contains `+`, which PVE rewrites to `_` (it would store `noble_v_1.qcow2`); use letters, digits, `-`, `_` and `.` only",
        )]),
    );
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": UBUNTU, "filename": ".qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.filename",
            "file name `.qcow2` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
        )]),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https://h/downloads/", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.url",
            "the URL names no file (its path is empty or ends in `/`); set spec.filename",
        )]),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https://h/x.iso.xz", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.url",
            "the file name taken from the URL, `x.iso.xz`, must end in .iso or .img (PVE keeps iso content only under these extensions); set spec.filename",
        )]),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https://h/x.iso.zst", "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.url",
            "the file name taken from the URL, `x.iso.zst`, must end in .iso or .img (PVE keeps iso content only under these extensions); set compression: zst to have PVE decompress it to `x.iso`",
        )]),
    );
    let long = format!("{}.iso", "a".repeat(252));
    check(
        &ISO,
        json!({"storage": "local", "url": UBUNTU, "filename": long, "checksum": SHA256, "checksum-algorithm": "sha256"}),
        Err(&[(
            "spec.filename",
            "file name must be at most 255 characters, got 256",
        )]),
    );
}

#[test]
fn field_rules() {
    check(
        &ISO,
        json!({"storage": "local", "url": "ftp://x/a.iso", "checksum": "ab", "compression": "xz"}),
        Err(&[
            ("spec.url", "`ftp://x/a.iso` is not an http(s) URL"),
            (
                "spec.compression",
                "must be one of `gz`, `lzo`, `zst`, `bz2`, got `xz`",
            ),
            (
                "spec.checksum-algorithm",
                "is required when checksum is set",
            ),
        ]),
    );
    check(
        &DISK_IMAGE,
        json!({"url": "https://h/a.raw", "compression": "gz", "checksum-algorithm": "sha256"}),
        Err(&[
            (
                "spec.compression",
                "unknown field `compression`; expected one of `nodes`, `storage`, `url`, `filename`, `checksum`, `checksum-algorithm`, `verify-certificates`, `size`",
            ),
            ("spec.storage", "is required"),
            (
                "spec.checksum",
                "is required when checksum-algorithm is set",
            ),
        ]),
    );
    // A checksum of the wrong type is reported once, not also as missing.
    check(
        &DISK_IMAGE,
        json!({"storage": "local", "url": "https://h/a.raw", "checksum": 1234, "checksum-algorithm": "sha256"}),
        Err(&[("spec.checksum", "expected a string, got an integer")]),
    );
    check(
        &DISK_IMAGE,
        json!({"nodes": ["pve01", "pve_2", "pve01"], "storage": "Local", "url": "https://h/a.raw",
            "checksum": "abc123", "checksum-algorithm": "sha256", "size": 0, "verify-certificates": "no"}),
        Err(&[
            (
                "spec.nodes[1]",
                "`pve_2` is not a PVE node name (letters, digits and `-`, not at either end)",
            ),
            ("spec.nodes[2]", "`pve01` is listed twice"),
            (
                "spec.storage",
                "`Local` is not a PVE storage id (a lower-case letter, then lower-case letters, digits, `-`, `_` or `.`, ending in a letter or digit)",
            ),
            ("spec.checksum", "a sha256 digest has 64 hex digits, got 6"),
            (
                "spec.verify-certificates",
                "expected true or false, got a string",
            ),
            ("spec.size", "must be from 1 to 9223372036854775807, got 0"),
        ]),
    );
    check(
        &DISK_IMAGE,
        json!({"nodes": [], "storage": "local", "url": "https://h/a.raw", "checksum": "xyz", "checksum-algorithm": "md5"}),
        Err(&[
            (
                "spec.nodes",
                "must list at least one node; remove it to place the file on the nodes of the VMs that use it",
            ),
            ("spec.checksum", "must be a hex digest"),
        ]),
    );
    check(
        &ISO,
        json!({"storage": "local", "url": "https:///a.iso"}),
        Err(&[
            ("spec.url", "`https:///a.iso` is not an http(s) URL"),
            NOCHECK,
        ]),
    );
}

#[test]
fn desired_json_shape_is_stable() {
    let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": "DiskImage", "metadata": {"name": "noble"},
        "spec": {"storage": "local", "url": "https://h/noble.qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}});
    let (d, _) = validate(&DISK_IMAGE, &doc).unwrap();
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"kind": "DiskImage", "name": "noble", "storage": "local", "url": "https://h/noble.qcow2",
            "filename": "noble.qcow2", "content": "import", "volid": "local:import/noble.qcow2",
            "checksum": SHA256, "checksum-algorithm": "sha256", "verify-certificates": true})
    );
    assert_eq!(
        identity_key(&d),
        (
            "storage-volume".to_string(),
            "local:import/noble.qcow2".to_string()
        )
    );
}

#[test]
fn schema_lists_checker_keys() {
    for k in [&ISO, &DISK_IMAGE] {
        let s = schema(k);
        let props = s["properties"]["spec"]["properties"].as_object().unwrap();
        let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
        keys.sort();
        let mut want = spec_keys(k);
        want.sort();
        assert_eq!(keys, want);
        for (key, p) in props {
            assert!(
                p["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{} {key} has no description",
                k.kind
            );
        }
    }
    let iso = schema(&ISO);
    assert_eq!(
        iso["properties"]["spec"]["properties"]["filename"]["pattern"],
        "^[A-Za-z0-9_.-]+\\.([iI][sS][oO]|[iI][mM][gG])$"
    );
}

/// A referrer's reference names the target (this DiskImage); its own kind and name come from
/// its desired state, so that messages name the VM that uses the file.
#[test]
fn a_referrer_is_named_by_its_own_state() {
    use proxops_kind_sdk::kind::{Reference, Resolved};
    let resolved = |desired: &str| Resolved {
        reference: Reference {
            kind: "DiskImage".into(),
            name: "noble".into(),
            path: "spec.disks[0].image".into(),
        },
        desired: desired.into(),
    };
    for (desired, kind, name) in [
        (r#"{"kind":"VM","name":"web","node":"pve01"}"#, "VM", "web"),
        (r#"{"node":"pve01"}"#, "object", "?"),
        ("not json", "object", "?"),
    ] {
        let r = Referrer::from(&resolved(desired));
        assert_eq!(
            (r.kind.as_str(), r.name.as_str()),
            (kind, name),
            "{desired}"
        );
        assert_eq!(r.path, "spec.disks[0].image");
    }
}
