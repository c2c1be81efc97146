//! Property test of adopt, in-process against the simulator library with the bundled kinds:
//! for generated live guests (made through the PVE API, a wide spread of hardware, templates
//! among them, running or not), adopt sends only reads, every guest gets a manifest, and the
//! first plan of those manifests proposes the ownership tags and nothing else. After that
//! apply (config writes of `tags` only), the next plan is empty.

use std::collections::BTreeSet;
use std::sync::Arc;

use proxops_pve::Method;
use proxops_reconcile::adopt::{Adoption, adopt_entries, finish_manifest};
use proxops_reconcile::{KindRegistry, Silent};

use crate::support::Rng;

/// One of `items`.
fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u64) as usize]
}

/// True one time in `one_in`.
fn chance(rng: &mut Rng, one_in: u64) -> bool {
    rng.below(one_in) == 0
}

const CASES: u64 = 12;
const GUESTS: u64 = 3;

#[tokio::test(flavor = "multi_thread")]
async fn adopted_live_guests_plan_nothing_but_their_ownership_tags() {
    let cache = crate::support::shared_cache();
    let runtime = proxops_runtime::Runtime::new(proxops_runtime::RuntimeConfig {
        cache_dir: Some(cache),
    })
    .expect("runtime");
    let registry = KindRegistry::bundled(&runtime).expect("bundled kinds");
    let mut clones = 0;
    for seed in 1..=CASES {
        clones += check_case(&registry, seed).await;
    }
    assert!(
        clones >= 3,
        "the seeds cover clones of templates ({clones})"
    );
}

/// The create parameters of one generated guest, and whether to make it a template.
fn generate(rng: &mut Rng, vmid: u64) -> (Vec<(String, String)>, bool) {
    let mut p: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| p.push((k.to_string(), v));
    set("vmid", vmid.to_string());
    set(
        "name",
        pick(rng, &["web", "db-01", "Gen.VM", "app.corp.example", "x"]).to_string(),
    );
    let memory = [512u64, 1024, 2048, 4096][rng.below(4) as usize];
    set("memory", memory.to_string());
    if chance(rng, 2) {
        set("cores", pick(rng, &["1", "2", "4"]).to_string());
    }
    if chance(rng, 3) {
        set("sockets", "2".to_string());
    }
    if chance(rng, 2) {
        set(
            "cpu",
            pick(rng, &["host", "x86-64-v2-AES", "kvm64"]).to_string(),
        );
    }
    match rng.below(3) {
        0 => {}
        1 => {
            set("bios", "ovmf".to_string());
            set("machine", "q35".to_string());
            set(
                "efidisk0",
                "local-lvm:1,efitype=4m,pre-enrolled-keys=1".to_string(),
            );
        }
        _ => set("machine", "q35".to_string()),
    }
    let single = chance(rng, 2);
    if single {
        set("scsihw", "virtio-scsi-single".to_string());
    } else if chance(rng, 2) {
        set("scsihw", "virtio-scsi-pci".to_string());
    }
    let slots = ["scsi0", "scsi1", "virtio0", "sata0"];
    let first = rng.below(slots.len() as u64) as usize;
    let count = 1 + rng.below(3) as usize;
    for slot in slots.iter().cycle().skip(first).take(count) {
        let mut v = format!("local-lvm:{}", 1 + rng.below(16));
        if chance(rng, 2) {
            v.push_str(",discard=on");
        }
        if !slot.starts_with("virtio") && chance(rng, 2) {
            v.push_str(",ssd=1");
        }
        if (slot.starts_with("virtio") || (single && slot.starts_with("scsi"))) && chance(rng, 2) {
            v.push_str(",iothread=1");
        }
        if chance(rng, 3) {
            v.push_str(",cache=writeback");
        }
        set(slot, v);
    }
    for n in 0..(1 + rng.below(2)) {
        let mut v = format!(
            "{},bridge=vmbr0",
            pick(rng, &["virtio", "e1000", "vmxnet3"])
        );
        if chance(rng, 2) {
            v.push_str(&format!(",tag={}", 2 + rng.below(4000)));
        }
        if chance(rng, 2) {
            v.push_str(",firewall=1");
        }
        set(&format!("net{n}"), v);
    }
    if chance(rng, 2) {
        set("ide2", "local-lvm:cloudinit".to_string());
        set("ciuser", pick(rng, &["ops", "admin"]).to_string());
        set(
            "ipconfig0",
            format!(
                "ip=10.0.{}.{}/24,gw=10.0.0.1",
                rng.below(3),
                2 + rng.below(200)
            ),
        );
        if chance(rng, 2) {
            set("nameserver", "10.0.0.53".to_string());
            set("searchdomain", "corp.example".to_string());
        }
    }
    for (key, value) in [
        ("onboot", "1"),
        ("protection", "1"),
        ("agent", "1"),
        ("tablet", "0"),
        ("numa", "1"),
        ("ostype", "l26"),
        ("description", "made by hand"),
        ("tags", "web;prod"),
        // Keys no field models: adopted into spec.extra.
        ("vga", "qxl"),
        ("startup", "order=2"),
        ("hotplug", "disk,network"),
        ("serial0", "socket"),
    ] {
        if chance(rng, 3) {
            set(key, value.to_string());
        }
    }
    if chance(rng, 3) {
        set("balloon", (memory / 2).to_string());
    }
    let template = chance(rng, 4);
    if !template && chance(rng, 2) {
        set("start", "1".to_string());
    }
    (p, template)
}

/// Checks one generated cluster; returns how many clones of templates it held.
async fn check_case(registry: &KindRegistry, seed: u64) -> usize {
    let mut rng = Rng::for_seed(seed);
    let lab = crate::support::Lab::start().await;
    let nodes = ["pve01", "pve02"];
    let mut made = Vec::new();
    let mut nodes_of = Vec::new();
    for i in 0..GUESTS {
        let vmid = 100 + i * 7 + rng.below(5);
        let node = nodes[rng.below(2) as usize];
        let (params, template) = generate(&mut rng, vmid);
        let refs: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        lab.pve(Method::Post, &format!("/nodes/{node}/qemu"), &refs)
            .await;
        if template {
            lab.pve(
                Method::Post,
                &format!("/nodes/{node}/qemu/{vmid}/template"),
                &[],
            )
            .await;
        }
        made.push((vmid, params, template));
        nodes_of.push(node);
    }
    // A clone of a template (linked or full), made through the API as a human would.
    let mut clones = 0;
    if let Some(at) = made.iter().position(|(_, _, template)| *template) {
        clones += 1;
        let (tpl, node) = (made[at].0, nodes_of[at]);
        let newid = 200 + rng.below(50);
        let full = if chance(&mut rng, 2) { "1" } else { "0" };
        lab.pve(
            Method::Post,
            &format!("/nodes/{node}/qemu/{tpl}/clone"),
            &[
                ("newid", newid.to_string().as_str()),
                ("name", "from-template"),
                ("full", full),
            ],
        )
        .await;
        if chance(&mut rng, 2) {
            lab.pve(
                Method::Post,
                &format!("/nodes/{node}/qemu/{newid}/status/start"),
                &[],
            )
            .await;
        }
        made.push((newid, vec![("clone-of".into(), tpl.to_string())], false));
    }
    let before: Vec<_> = made
        .iter()
        .map(|(vmid, ..)| lab.config(*vmid as u32))
        .collect();
    lab.clear();

    // Adopt: reads only, a manifest for every guest.
    let listing = proxops_reconcile::observe::CLUSTER_RESOURCES;
    let live = proxops_reconcile::observe::listing(&lab.client, listing)
        .await
        .expect("cluster resources");
    let guests: Vec<proxops_reconcile::live::Entry> = live
        .into_iter()
        .filter(|e| e.str("type") == Some("qemu"))
        .collect();
    assert_eq!(guests.len(), made.len(), "seed {seed}");
    let results = adopt_entries(registry, &lab.client, listing, &guests, None).await;
    let writes: Vec<String> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating())
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "seed {seed}: adopt wrote {writes:?}");
    let mut taken = BTreeSet::new();
    for (entry, result) in guests.iter().zip(results) {
        let (kind, mut manifest) = match result {
            Adoption::Adopted { kind, manifest, .. } => (kind, manifest),
            Adoption::NotAdopted { resource, reasons } => {
                panic!("seed {seed}: {resource} not adopted: {reasons:?}\n{made:#?}")
            }
        };
        let info = registry.get(kind).info();
        let name = finish_manifest(&mut manifest, entry, &info.kind, &mut taken);
        lab.write(
            &format!("{}/lab/{name}.yaml", info.folder),
            &serde_yaml::to_string(&manifest).unwrap(),
        );
    }

    // The first plan: the ownership tags, nothing else.
    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (repo, _) = proxops_core::load(lab.repo.path(), &folders);
    let (catalog, diags) =
        proxops_reconcile::validate_repo(registry, &repo, &proxops_reconcile::Secrets::default());
    assert!(
        diags.iter().all(|d| !d.is_error()),
        "seed {seed}: adopted manifests validate: {diags:?}"
    );
    let objects = catalog.objects;
    assert_eq!(objects.len(), made.len(), "seed {seed}");
    let cycle = proxops_reconcile::Cycle {
        registry,
        client: &lab.client,
        cluster: "lab",
        objects: &objects,
        read_concurrency: Some(8),
        secrets: None,
    };
    let plan = proxops_reconcile::plan_cluster(&cycle, None)
        .await
        .expect("plan");
    for o in &plan.objects {
        let id = &o.object.id;
        let p = &o.proposal;
        assert!(o.error.is_none(), "seed {seed}: {id}: {:?}", o.error);
        assert!(
            p.drift.iter().all(|d| d.path.ends_with("tags")),
            "seed {seed}: {id}: drift beyond the tags: {:?}\n{made:#?}",
            p.drift
        );
        assert!(p.pending.is_empty(), "seed {seed}: {id}: {:?}", p.pending);
        assert!(
            p.anomalies.is_empty(),
            "seed {seed}: {id}: {:?}",
            p.anomalies
        );
        assert_eq!(p.actions.len(), 1, "seed {seed}: {id}: {:?}", p.actions);
        let action = &p.actions[0];
        assert!(
            !action.disturbs_availability && !action.destructive,
            "seed {seed}: {id}"
        );
        assert!(
            action.changes.iter().all(|c| c.key == "tags"),
            "seed {seed}: {id}: {:?}\n{made:#?}",
            action.changes
        );
        for call in &action.calls {
            assert!(
                call.path.ends_with("/config")
                    && call
                        .params
                        .iter()
                        .all(|p| p.name == "tags" || p.name == "digest"),
                "seed {seed}: {id}: {} {:?}",
                call.path,
                call.params
            );
        }
    }

    // Apply: config writes of the tags only, and then nothing left to do.
    lab.clear();
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
    for r in lab.sim.requests().into_iter().filter(|r| r.is_mutating()) {
        assert!(
            r.path.ends_with("/config")
                && r.params.iter().all(|(k, _)| k == "tags" || k == "digest"),
            "seed {seed}: apply sent {} {} {:?}",
            r.method,
            r.path,
            r.params
        );
    }
    for ((vmid, ..), old) in made.iter().zip(&before) {
        let mut now = lab.config(*vmid as u32);
        let mut old = old.clone();
        now.remove("tags");
        now.remove("digest");
        old.remove("tags");
        old.remove("digest");
        assert_eq!(
            now, old,
            "seed {seed}: guest {vmid} changed beyond its tags"
        );
    }
    let again = proxops_reconcile::plan_cluster(&cycle, None)
        .await
        .expect("plan");
    for o in &again.objects {
        assert!(
            !o.has_actions(),
            "seed {seed}: {} not converged: {:?}",
            o.object.id,
            o.proposal.actions
        );
    }
    clones
}
