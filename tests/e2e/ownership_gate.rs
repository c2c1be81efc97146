//! Property test of the ownership gate, in-process against the simulator library with the
//! bundled kinds: for random live states with unowned guests (untagged, or copies of a proxops
//! guest) on random vmids and random
//! manifests (VMs and TemplateVMs, some on those vmids, some cloning from them), no mutating
//! request ever targets an unowned guest, and their configs are left as they were.

use std::collections::BTreeMap;
use std::sync::Arc;

use proxops_reconcile::{KindRegistry, Silent};

use crate::support::Rng;

const CASES: u64 = 12;

#[tokio::test(flavor = "multi_thread")]
async fn no_request_ever_targets_an_untagged_guest() {
    let cache = crate::support::shared_cache();
    let runtime = proxops_runtime::Runtime::new(proxops_runtime::RuntimeConfig {
        cache_dir: Some(cache),
    })
    .expect("runtime");
    let registry = KindRegistry::bundled(&runtime).expect("bundled kinds");
    for seed in 1..=CASES {
        check_case(&registry, seed).await;
    }
}

async fn check_case(registry: &KindRegistry, seed: u64) {
    let mut rng = Rng::for_seed(seed);
    let lab = crate::support::Lab::start().await;
    let nodes = ["pve01", "pve02"];
    // Unowned guests: someone else's VMs and templates, running or not.
    let mut untagged: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
    for _ in 0..(2 + rng.below(4)) {
        let vmid = 100 + rng.below(12) as u32;
        if untagged.contains_key(&vmid) {
            continue;
        }
        let node = nodes[rng.below(2) as usize];
        let id = vmid.to_string();
        // Untagged, or a copy of a proxops guest (tagged, its mark naming another vmid).
        let tags = ["", "prod", "prod;web", "proxops;proxops-999"][rng.below(4) as usize];
        let running = if rng.below(2) == 0 { "1" } else { "0" };
        let mut params = vec![
            ("vmid", id.as_str()),
            ("name", "theirs"),
            ("memory", "2048"),
            ("scsi0", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0"),
        ];
        if !tags.is_empty() {
            params.push(("tags", tags));
        }
        let template = rng.below(3) == 0;
        if !template {
            params.push(("start", running));
        }
        lab.pve(
            proxops_pve::Method::Post,
            &format!("/nodes/{node}/qemu"),
            &params,
        )
        .await;
        if template {
            lab.pve(
                proxops_pve::Method::Post,
                &format!("/nodes/{node}/qemu/{vmid}/template"),
                &[],
            )
            .await;
        }
        untagged.insert(vmid, lab.config(vmid));
    }
    // Manifests on random vmids of the same range: some collide with untagged guests.
    let mut used = std::collections::BTreeSet::new();
    let mut templates = Vec::new();
    for i in 0..(3 + rng.below(4)) {
        let vmid = 100 + rng.below(14) as u32;
        if !used.insert(vmid) {
            continue;
        }
        let node = nodes[rng.below(2) as usize];
        let name = format!("m{i}");
        let text = if rng.below(3) == 0 {
            templates.push((name.clone(), node));
            crate::support::template(&name, node, vmid, "  state: stopped\n")
        } else if let Some((t, tnode)) = templates.first().filter(|_| rng.below(2) == 0) {
            crate::support::vm(&name, tnode, vmid, &format!("  clone: {t}\n"))
                .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", "")
        } else {
            let extra =
                ["", "  state: stopped\n", "  hardware: {machine: q35}\n"][rng.below(3) as usize];
            crate::support::vm(&name, node, vmid, extra)
        };
        let folder = if text.contains("kind: TemplateVM") {
            "templatevm"
        } else {
            "vm"
        };
        lab.write(&format!("{folder}/lab/{name}.yaml"), &text);
    }
    lab.clear();

    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (repo, _) = proxops_core::load(lab.repo.path(), &folders);
    let (catalog, diags) =
        proxops_reconcile::validate_repo(registry, &repo, &proxops_reconcile::Secrets::default());
    assert!(
        diags.iter().all(|d| !d.is_error()),
        "seed {seed}: the manifests are valid: {diags:?}"
    );
    let objects: Vec<_> = catalog.objects;
    // Twice: the second run sees what the first created (clones of owned templates, prunes).
    for _ in 0..2 {
        let cycle = proxops_reconcile::Cycle {
            registry,
            client: &lab.client,
            cluster: "lab",
            objects: &objects,
            read_concurrency: Some(8),
            secrets: None,
        };
        let plan = match proxops_reconcile::plan_cluster(&cycle, None).await {
            Ok(p) => p,
            // A vmid taken by a container is a cluster-level conflict: nothing is sent.
            Err(_) => break,
        };
        let options = crate::support::apply_options();
        let _ = proxops_reconcile::apply(
            registry,
            &lab.client,
            &objects,
            plan,
            options,
            Arc::new(Silent),
        )
        .await;
    }
    for r in lab.sim.requests().into_iter().filter(|r| r.is_mutating()) {
        for vmid in untagged.keys() {
            let segment = format!("/qemu/{vmid}");
            let about = r.path.contains(&format!("{segment}/")) || r.path.ends_with(&segment);
            assert!(
                !about,
                "seed {seed}: {} {} targets untagged guest {vmid}",
                r.method, r.path
            );
            assert!(
                !(r.path.ends_with("/qemu")
                    && r.params
                        .iter()
                        .any(|(k, v)| k == "vmid" && *v == vmid.to_string())),
                "seed {seed}: a create on the vmid of untagged guest {vmid}"
            );
        }
    }
    for (vmid, before) in &untagged {
        assert_eq!(
            lab.sim.vm_config(*vmid).as_ref(),
            Some(before),
            "seed {seed}: untagged guest {vmid} changed"
        );
    }
}
