//! The diff pass over cloud-init data: identity keys, secrets, and what a clone inherits.

use std::collections::BTreeSet;

use proxops_kind_sdk::model::Drift;

use super::{Ctx, Diff, Outcome, simple};
use crate::cloudinit::{self, Keys};

/// Cloud-init data: declared keys are owned (set-compared where the spec says so); undeclared
/// keys are not owned, except on a clone-backed VM, where an inherited identity key
/// (`ciuser`, `sshkeys`, `nameserver`, `searchdomain`, `ipconfig<N>`) the manifest does not
/// declare is the template's and is cleared. `cipassword` is written only when absent and is
/// never compared or deleted.
pub(super) fn diff_cloud_init_data(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    let data = d.cloud_init_data.clone().unwrap_or_default();
    let clear = d.clone.is_some();
    let p = cloudinit::PATH;
    let path = |f: &str| format!("{p}.{f}");

    match &data.ci_user {
        Some(u) => {
            let want = u.clone();
            x.key(
                "ciuser",
                false,
                simple(&path("ci-user"), u.clone(), move |l| l == want, None),
            );
        }
        None if clear && x.cfg.get("ciuser").is_some() => x.delete("ciuser", &path("ci-user")),
        None => {}
    }

    match &ctx.ci.keys {
        Keys::PveOwned => {}
        Keys::NotOwned => {
            if clear && x.cfg.get("sshkeys").is_some() {
                // The template's keys: their provenance is unknown, so they are not shown.
                x.delete_with("sshkeys", &path("ssh-keys"), true);
            }
        }
        keys => {
            let lines = keys.lines().unwrap_or_default();
            let want: BTreeSet<String> = lines.iter().cloned().collect();
            let value = cloudinit::sshkeys_value(&lines);
            let sensitive = keys.sensitive();
            let (field, shown) = if sensitive {
                (path("ssh-key-refs"), data.ssh_key_refs.join(", "))
            } else {
                (path("ssh-keys"), value.clone())
            };
            x.key_with("sshkeys", false, sensitive, move |live| {
                if live.is_some_and(|l| cloudinit::live_key_set(l) == want) {
                    return Outcome::Same;
                }
                Outcome::Write(
                    value.clone(),
                    vec![Drift::new(
                        &field,
                        live.map(str::to_string),
                        Some(shown.clone()),
                    )],
                )
            });
        }
    }

    if let (Some(pw), Some(r)) = (&ctx.ci.password, &data.ci_password_ref) {
        let value = pw.expose().to_string();
        let shown = r.clone();
        let field = path("ci-password-ref");
        x.key_with("cipassword", false, true, move |live| {
            if live.is_some() {
                return Outcome::Same;
            }
            Outcome::Write(
                value.clone(),
                vec![Drift::new(&field, None, Some(shown.clone()))],
            )
        });
    }

    for (key, field, want) in [
        ("nameserver", "nameservers", &data.nameservers),
        ("searchdomain", "search-domains", &data.search_domains),
    ] {
        if want.is_empty() {
            if clear && x.cfg.get(key).is_some() {
                x.delete(key, &path(field));
            }
            continue;
        }
        let set: BTreeSet<String> = want.iter().cloned().collect();
        x.key(
            key,
            false,
            simple(
                &path(field),
                want.join(" "),
                move |l| cloudinit::live_list(l) == set,
                None,
            ),
        );
    }

    for (i, ip) in data.ipconfigs.iter().enumerate() {
        let key = format!("ipconfig{}", ip.nic);
        let ip = ip.clone();
        x.key(
            &key,
            false,
            simple(
                &format!("{p}.ipconfigs[{i}]"),
                cloudinit::ipconfig_value(&ip),
                move |l| cloudinit::ipconfig_eq(l, &ip),
                None,
            ),
        );
    }
    if clear {
        let owned: BTreeSet<String> = data
            .ipconfigs
            .iter()
            .map(|ip| format!("ipconfig{}", ip.nic))
            .collect();
        let inherited: Vec<String> = x
            .cfg
            .keys
            .keys()
            .filter(|k| {
                matches!(crate::syntax::split_slot(k), Some(("ipconfig", _))) && !owned.contains(*k)
            })
            .cloned()
            .collect();
        for k in inherited {
            x.delete(&k, &format!("{p}.ipconfigs ({k})"));
        }
    }
}
