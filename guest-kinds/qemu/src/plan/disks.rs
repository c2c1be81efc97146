//! The diff pass over `spec.disks`: sizes (grow-only), pools, image seeds; a live disk the manifest does not declare is reported, never deleted.

use std::collections::BTreeSet;

use proxops_kind_sdk::model::{Anomaly, Drift};
use proxops_kind_sdk::size::{self, GIB};

use super::{Ctx, Diff, Outcome};
use crate::wire;

pub(super) fn diff_disks(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    for (i, disk) in d.disks.iter().enumerate() {
        let path = format!("spec.disks[{i}]");
        let import = ctx.targets.images.get(&i);
        let Some(live) = x.cfg.get(&disk.slot).map(str::to_string) else {
            // An empty slot gets a new volume; an image-seeded disk is imported into it.
            let v = match import {
                Some(src) => wire::import_disk(disk, src),
                None => wire::new_disk(disk),
            };
            let storage = disk.storage.clone();
            x.key(&disk.slot, false, |live| match live {
                Some(l) if wire::pool(&wire::drive(l).bare.unwrap_or_default()) == storage => {
                    Outcome::Same
                }
                _ => Outcome::Write(v.clone(), vec![Drift::new(&path, None, Some(v.clone()))]),
            });
            continue;
        };
        let drv = wire::drive(&live);
        if wire::is_cdrom(&drv) || wire::is_cloudinit(&drv) {
            x.out.anomalies.push(Anomaly::new(
                &path,
                format!(
                    "slot {} holds `{live}`, not a disk; proxops does not replace it",
                    disk.slot
                ),
            ));
            continue;
        }
        let vol = drv.bare.clone().unwrap_or_default();
        if wire::pool(&vol) != disk.storage {
            let why = if disk.image.is_some() {
                "; an image-seeded disk is imported once and never re-imported"
            } else {
                ""
            };
            x.out.anomalies.push(Anomaly::new(
                format!("{path}.storage"),
                format!("disk {} is on storage {} but the manifest says {}; moving a volume is a storage migration, proxops does not do it{why}", disk.slot, wire::pool(&vol), disk.storage),
            ));
            continue;
        }
        if disk.image.is_some() {
            // PVE does not report import-from back and the size comes from the image: only the
            // pool of an image-seeded disk is compared.
            continue;
        }
        if let (Some(want), Some(have)) = (disk.size_gib, wire::drive_size(&drv)) {
            let want_b = want * GIB;
            if have > want_b {
                x.out.anomalies.push(Anomaly::new(
                    format!("{path}.size"),
                    format!(
                        "disk {} is {} but the manifest says {want}GiB; PVE cannot shrink disks",
                        disk.slot,
                        size::format_human(have)
                    ),
                ));
            } else if have < want_b {
                let old = drv.get("size").map(str::to_string);
                x.out.drift.push(Drift::new(
                    format!("{path}.size"),
                    old.clone(),
                    Some(format!("{want}G")),
                ));
                x.resizes.push((disk.slot.clone(), format!("{want}G"), old));
            }
        }
        let tokens = wire::disk_tokens(disk);
        let path2 = path.clone();
        x.key(&disk.slot, false, move |live| {
            let Some(live) = live else {
                return Outcome::Same;
            };
            let mut p = wire::drive(live);
            let mut drift = Vec::new();
            for (k, v) in &tokens {
                let have = p.get(k).or(wire::disk_token_default(k));
                if !have.is_some_and(|h| wire::token_eq(h, v)) {
                    drift.push(Drift::new(
                        format!("{path2}.{k}"),
                        p.get(k).map(str::to_string),
                        Some(v.clone()),
                    ));
                    p.set(k, v.clone());
                }
            }
            if drift.is_empty() {
                Outcome::Same
            } else {
                Outcome::Write(p.canonical(), drift)
            }
        });
    }
    // Live disks the manifest does not declare: reported, never deleted.
    let owned: BTreeSet<&str> = d.disks.iter().map(|k| k.slot.as_str()).collect();
    for (k, v) in &x.cfg.keys {
        if !crate::syntax::is_disk_key(k) || owned.contains(k.as_str()) {
            continue;
        }
        let drv = wire::drive(v);
        if wire::is_cdrom(&drv) || wire::is_cloudinit(&drv) {
            continue;
        }
        if d.clone.is_some() {
            continue; // a clone's disks come from its template
        }
        x.out.anomalies.push(Anomaly::new("spec.disks", format!("live disk {k} (`{v}`) is not declared in the manifest; proxops never deletes disks it was not asked to")));
    }
}
