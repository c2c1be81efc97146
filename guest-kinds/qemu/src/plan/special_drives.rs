//! The diff pass over the special drives: the cloud-init drive, the CD/DVD drive, the EFI disk and the TPM state.

use proxops_kind_sdk::model::{Anomaly, Drift};
use proxops_kind_sdk::propstring::parse_bool;

use super::{Ctx, Diff, Outcome};
use crate::wire;

pub(super) fn diff_special_drives(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let hw = &ctx.d.hardware;
    // A cloud-init drive PVE holds on another slot (a template built elsewhere): PVE allows only
    // one, so it is reported, never moved or doubled.
    // (Looked for only when the manifest has a cloud-init drive: it reads every disk of the VM.)
    let elsewhere = hw.cloud_init.as_ref().and_then(|_| {
        x.cfg.keys.iter().find(|(k, v)| {
            k.as_str() != "ide2"
                && crate::syntax::is_disk_key(k)
                && wire::is_cloudinit(&wire::drive(v))
        })
    });
    if let (Some(_), Some((k, v))) = (&hw.cloud_init, elsewhere) {
        x.out.anomalies.push(Anomaly::new(
            "spec.hardware.cloud-init",
            format!("the cloud-init drive is on {k} (`{v}`), the manifest puts it on ide2; PVE allows one cloud-init drive and proxops does not move it"),
        ));
    } else if let Some(ci) = &hw.cloud_init {
        let storage = ci.storage.clone();
        let live = x.cfg.get("ide2").map(str::to_string);
        match live {
            Some(l) if wire::is_cloudinit(&wire::drive(&l)) => {
                let vol = wire::drive(&l).bare.unwrap_or_default();
                if wire::pool(&vol) != storage {
                    x.out.anomalies.push(Anomaly::new(
                        "spec.hardware.cloud-init.storage",
                        format!("the cloud-init drive is on storage {} but the manifest says {storage}; moving it is a storage migration, proxops does not do it", wire::pool(&vol)),
                    ));
                }
            }
            Some(l) if !wire::is_cdrom(&wire::drive(&l)) => {
                x.out.anomalies.push(Anomaly::new("spec.hardware.cloud-init", format!("ide2 holds the disk `{l}`; proxops does not replace a disk with the cloud-init drive")));
            }
            _ => {
                let v = format!("{storage}:cloudinit");
                x.key("ide2", false, |live| match live {
                    Some(l) if wire::is_cloudinit(&wire::drive(l)) => Outcome::Same,
                    _ => Outcome::Write(
                        v.clone(),
                        vec![Drift::new(
                            "spec.hardware.cloud-init",
                            live.map(str::to_string),
                            Some(v.clone()),
                        )],
                    ),
                });
            }
        }
    }
    if let Some(cd) = &hw.cdrom {
        let iso = ctx.targets.iso.clone();
        let want = match &iso {
            Some(volid) => wire::iso_cdrom(volid),
            None => wire::empty_cdrom(cd),
        };
        let media = cd.media.clone();
        let path = if iso.is_some() {
            "spec.hardware.cdrom.iso"
        } else {
            "spec.hardware.cdrom"
        };
        let live = x.cfg.get(&cd.slot).map(str::to_string);
        // The cloud-init drive is a CD to PVE too, but writing the CD/DVD over it would drop
        // the guest's cloud-init volume (a clone inherits one from its template even when the
        // VM declares no cloud-init): it is left as it is, and reported.
        if let Some(l) = live
            .as_deref()
            .filter(|l| wire::is_cloudinit(&wire::drive(l)))
        {
            x.out.anomalies.push(Anomaly::new(
                "spec.hardware.cdrom",
                format!(
                    "{} holds the cloud-init drive `{l}`; proxops does not replace it with a CD/DVD drive (declare spec.hardware.cloud-init to keep it on ide2 and have the CD/DVD on ide3)",
                    cd.slot
                ),
            ));
        } else if let Some(l) = live.as_deref().filter(|l| !wire::is_cdrom(&wire::drive(l))) {
            x.out.anomalies.push(Anomaly::new(
                "spec.hardware.cdrom",
                format!(
                    "{} holds the disk `{l}`; proxops does not replace a disk with a CD/DVD drive",
                    cd.slot
                ),
            ));
        } else {
            x.key(&cd.slot, false, move |live| {
                if let Some(l) = live {
                    let drv = wire::drive(l);
                    let bare = drv.bare.as_deref();
                    let same = match &iso {
                        Some(volid) => {
                            bare == Some(volid.as_str())
                                && drv.get("media").unwrap_or("disk") == "cdrom"
                        }
                        None => bare == Some("none") && drv.get("media").unwrap_or("disk") == media,
                    };
                    if same {
                        return Outcome::Same;
                    }
                }
                Outcome::Write(
                    want.clone(),
                    vec![Drift::new(
                        path,
                        live.map(str::to_string),
                        Some(want.clone()),
                    )],
                )
            });
        }
    }
    if let Some(e) = &hw.efi_disk {
        match x.cfg.get("efidisk0").map(str::to_string) {
            None => {
                let v = wire::new_efidisk(e);
                x.key("efidisk0", false, |live| {
                    if live.is_some() {
                        Outcome::Same
                    } else {
                        Outcome::Write(
                            v.clone(),
                            vec![Drift::new("spec.hardware.efi-disk", None, Some(v.clone()))],
                        )
                    }
                });
            }
            Some(l) => {
                let drv = wire::drive(&l);
                let vol = drv.bare.clone().unwrap_or_default();
                let live_type = drv.get("efitype").unwrap_or("2m").to_string();
                if wire::pool(&vol) != e.storage {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.efi-disk.storage", format!("the EFI disk is on storage {} but the manifest says {}; proxops does not move volumes", wire::pool(&vol), e.storage)));
                } else if e.template.as_ref().is_some_and(|t| *t != live_type) {
                    x.out.anomalies.push(Anomaly::new(
                        "spec.hardware.efi-disk.template",
                        format!("the EFI disk has efitype {live_type}, the manifest says {}; PVE cannot convert EFI vars in place (recreate the EFI disk)", e.template.as_deref().unwrap_or_default()),
                    ));
                } else if let Some(sb) = e.secure_boot {
                    // Toggle pre-enrolled-keys on the live form; ms-cert and the volume stay verbatim.
                    x.key("efidisk0", false, move |live| {
                        let Some(live) = live else {
                            return Outcome::Same;
                        };
                        let mut p = wire::drive(live);
                        if p.get("pre-enrolled-keys")
                            .and_then(parse_bool)
                            .unwrap_or(false)
                            == sb
                        {
                            return Outcome::Same;
                        }
                        // Both sides in the manifest's vocabulary (`enabled`/`disabled`).
                        let word = |on: bool| if on { "enabled" } else { "disabled" };
                        let old = Some(
                            word(
                                p.get("pre-enrolled-keys")
                                    .and_then(parse_bool)
                                    .unwrap_or(false),
                            )
                            .to_string(),
                        );
                        p.set("pre-enrolled-keys", wire::b(sb));
                        Outcome::Write(
                            p.to_string(),
                            vec![Drift::new(
                                "spec.hardware.efi-disk.secure-boot",
                                old,
                                Some(word(sb).into()),
                            )],
                        )
                    });
                }
            }
        }
    }
    if let Some(t) = &hw.tpm {
        match x.cfg.get("tpmstate0").map(str::to_string) {
            None => {
                let v = wire::new_tpm(t);
                x.key("tpmstate0", false, |live| {
                    if live.is_some() {
                        Outcome::Same
                    } else {
                        Outcome::Write(
                            v.clone(),
                            vec![Drift::new("spec.hardware.tpm", None, Some(v.clone()))],
                        )
                    }
                });
            }
            Some(l) => {
                let drv = wire::drive(&l);
                let vol = drv.bare.clone().unwrap_or_default();
                let version = drv.get("version").unwrap_or("v1.2");
                if wire::pool(&vol) != t.storage {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.tpm.storage", format!("the TPM state is on storage {} but the manifest says {}; proxops does not move volumes", wire::pool(&vol), t.storage)));
                } else if version != t.version {
                    x.out.anomalies.push(Anomaly::new("spec.hardware.tpm.version", format!("the TPM is {version}, the manifest says {}; PVE cannot change a TPM version", t.version)));
                }
            }
        }
    }
}
