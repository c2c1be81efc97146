use super::*;

fn stored(file: &str, cluster: &str, digest: u8) -> StoredManifest {
    StoredManifest {
        file: file.into(),
        folder: "vm".into(),
        cluster: cluster.into(),
        name: "web".into(),
        json: r#"{"apiVersion":"proxops/v1alpha1","kind":"VM"}"#.into(),
        api_version: Some("proxops/v1alpha1".into()),
        kind: Some("VM".into()),
        adopt: Some(r#"{"vmid":100}"#.into()),
        stated: None,
        digest: [digest; 32],
    }
}

fn replay(fingerprint: &str) -> Replay {
    Replay {
        fingerprint: fingerprint.into(),
        desired: r#"{"vmid":100}"#.into(),
        warnings: vec![kind::Diagnostic {
            path: "spec.disks[0]".into(),
            message: "no checksum".into(),
            severity: Severity::Warning,
        }],
        references: vec![Reference {
            kind: "TemplateVM".into(),
            name: "base".into(),
            path: "spec.clone".into(),
        }],
        key: ObjectKey {
            node: Some("pve01".into()),
            space: "guest-id".into(),
            key: "100".into(),
            resource_id: None,
        },
    }
}

/// Two entries, in clusters `lab` (with the kind's answers) and `edge` (without).
fn entries() -> HashMap<String, Entry> {
    [
        Entry {
            manifest: stored("vm/lab/web.yaml", "lab", 1),
            replay: Some(replay("abc/limits")),
        },
        Entry {
            manifest: stored("vm/edge/db.yaml", "edge", 2),
            replay: None,
        },
    ]
    .into_iter()
    .map(|e| (e.manifest.file.clone(), e))
    .collect()
}

/// [`entries`] by cluster, as a memo holds them.
fn by_cluster() -> HashMap<String, Files> {
    let mut clusters: HashMap<String, Files> = HashMap::new();
    for (file, e) in entries() {
        clusters
            .entry(e.manifest.cluster.clone())
            .or_default()
            .insert(file, e);
    }
    clusters
}

#[test]
fn what_is_written_reads_back() {
    let bytes = encode(&by_cluster(), "build 1");
    assert_eq!(decode(&bytes, "build 1"), Some(by_cluster()));
    assert_eq!(
        decode(&encode(&HashMap::new(), "b"), "b"),
        Some(HashMap::new())
    );
}

#[test]
fn a_damaged_or_foreign_file_is_refused_whole() {
    let bytes = encode(&by_cluster(), "build 1");
    let check = |bytes: &[u8], build: &str, what: &str| {
        assert_eq!(decode(bytes, build), None, "{what}");
    };
    check(&bytes, "build 2", "another build");
    check(&bytes[..bytes.len() - 1], "build 1", "cut short");
    check(&bytes[..3], "build 1", "three bytes");
    check(b"", "build 1", "empty");
    let mut flipped = bytes.clone();
    flipped[FORMAT.len() + 20] ^= 1;
    check(&flipped, "build 1", "one bit flipped");
    // A well-formed file with an entry after the count (its CRC recomputed) is refused too.
    let mut longer = bytes[..bytes.len() - 4].to_vec();
    longer.push(0);
    let crc = crc32fast::hash(&longer);
    longer.extend_from_slice(&crc.to_le_bytes());
    check(&longer, "build 1", "bytes after the last entry");
}

#[test]
fn a_file_is_known_only_by_the_same_bytes_and_the_same_kind() {
    let memo = Memo::in_memory();
    memo.lock().clusters = by_cluster();
    let lab = memo.take_cluster("lab");
    assert_eq!(lab.entries.len(), 1, "only the cluster's own entries");
    assert_eq!(memo.len(), (1, 0), "the other cluster's entry stays");

    assert!(lab.manifest("vm/lab/web.yaml", &[1; 32]).is_some());
    assert!(
        lab.manifest("vm/lab/web.yaml", &[9; 32]).is_none(),
        "other bytes"
    );
    assert!(
        lab.manifest("vm/lab/db.yaml", &[1; 32]).is_none(),
        "another file"
    );

    let same = lab.manifest("vm/lab/web.yaml", &[1; 32]).unwrap();
    assert!(lab.replay(&same, "abc/limits").is_some());
    assert!(
        lab.replay(&same, "abd/limits").is_none(),
        "another component"
    );
    let mut other = stored("vm/lab/web.yaml", "lab", 3);
    other.adopt = None;
    let other = Manifest::restore(other).unwrap();
    assert!(lab.replay(&other, "abc/limits").is_none(), "other bytes");
}

/// What one cluster's run learnt: every entry of `entries()` in `cluster` as `remember`.
fn learnt(cluster: &str, remember: impl Fn(&Entry) -> Remember) -> Vec<(StoredManifest, Remember)> {
    entries()
        .into_values()
        .filter(|e| e.manifest.cluster == cluster)
        .map(|e| {
            let r = remember(&e);
            (e.manifest, r)
        })
        .collect()
}

#[test]
fn only_a_change_makes_it_written() {
    let dir = tempfile::tempdir().unwrap();
    let open = || Memo::open(dir.path(), Path::new("/repo"), Path::new("/repo"));
    let memo = open();
    let path = memo.path.clone().unwrap();
    memo.save();
    assert!(!path.exists(), "nothing learnt: nothing written");

    let fresh = |e: &Entry| Remember::Fresh(e.replay.clone());
    for cluster in ["lab", "edge"] {
        let taken = memo.take_cluster(cluster);
        memo.put_cluster(taken, learnt(cluster, fresh));
    }
    memo.save();
    assert_eq!(open().len(), (2, 1));

    // The same answers again, asked (as a validation that read a secret is, every run) or
    // replayed: the file is not touched (removed here to see that).
    std::fs::remove_file(&path).unwrap();
    let taken = memo.take_cluster("lab");
    memo.put_cluster(taken, learnt("lab", |_| Remember::Known));
    let taken = memo.take_cluster("edge");
    memo.put_cluster(taken, learnt("edge", fresh));
    memo.save();
    assert!(!path.exists(), "unchanged: not written");
    assert_eq!(memo.len(), (2, 1));

    // New answers are a change.
    let taken = memo.take_cluster("edge");
    memo.put_cluster(
        taken,
        learnt("edge", |_| Remember::Fresh(Some(replay("new")))),
    );
    memo.save();
    assert_eq!(open().len(), (2, 2));

    // A file gone from the cluster is forgotten, and that is a change.
    let taken = memo.take_cluster("lab");
    memo.put_cluster(taken, Vec::new());
    memo.save();
    assert_eq!(open().len(), (1, 1));
}

#[test]
fn each_repository_has_its_own_memo() {
    let dir = tempfile::tempdir().unwrap();
    let a = Memo::open(dir.path(), Path::new("/a"), Path::new("/a"));
    let b = Memo::open(dir.path(), Path::new("/b"), Path::new("/b"));
    let trusted = Memo::open(dir.path(), Path::new("/a"), Path::new("/trusted"));
    assert_ne!(a.path, b.path);
    assert_ne!(
        a.path, trusted.path,
        "another config root reads other cluster files"
    );
}
