//! Planning cases: `spec.pool`, set by the create or clone, and reported (never repaired) on a
//! live guest whose pool differs.

use super::*;

fn in_pool(pool: Option<&str>) -> Option<Value> {
    let mut e = entry("stopped", false);
    if let Some(p) = pool {
        e["pool"] = json!(p);
    }
    Some(e)
}

#[test]
fn create_and_clone_carry_the_pool() {
    let create = run(Case {
        live: None,
        patches: &[("spec/pool", json!("web"))],
        ..Case::default()
    });
    let call = &create.actions[0].calls[0];
    assert_eq!(call.path, "/nodes/pve01/qemu");
    assert_eq!(
        call.params
            .iter()
            .filter(|p| p.name == "pool")
            .map(|p| p.value.as_str())
            .collect::<Vec<_>>(),
        ["web"]
    );
    assert!(
        create.actions[0]
            .changes
            .iter()
            .any(|c| c.key == "pool" && c.new.as_deref() == Some("web"))
    );
    check(
        Case {
            live: None,
            patches: &clone_patches(&[("spec/pool", json!("web"))]),
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01 as a full clone of TemplateVM `golden` (9000)",
            "  Post /nodes/pve01/qemu/9000/clone newid=100 full=1 name=web-01 pool=web",
            "drift : - -> VM 100 on pve01",
        ],
    );
    // Without spec.pool nothing names a pool.
    let plain = run(Case {
        live: None,
        ..Case::default()
    });
    assert!(
        plain.actions[0].calls[0]
            .params
            .iter()
            .all(|p| p.name != "pool")
    );
}

fn clone_patches(extra: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
    super::create::clone_patches(extra)
}

/// (spec.pool, the live entry's pool, the anomaly expected: none, or words it contains)
#[test]
fn a_live_pool_that_differs_is_reported_not_moved() {
    for (want, live, expected) in [
        (Some("web"), Some("web"), None),
        (None, Some("web"), None),
        (None, None, None),
        (
            Some("web"),
            Some("db"),
            Some("is in pool db, the manifest says spec.pool: web"),
        ),
        (
            Some("web"),
            None,
            Some("is in no pool, the manifest says spec.pool: web"),
        ),
    ] {
        let patches: Vec<(&str, Value)> =
            want.map(|w| ("spec/pool", json!(w))).into_iter().collect();
        let p = run(Case {
            patches: &patches,
            live: in_pool(live),
            ..Case::default()
        });
        assert!(p.actions.is_empty(), "{want:?} {live:?}: {:?}", p.actions);
        match expected {
            None => assert!(
                p.anomalies.is_empty(),
                "{want:?} {live:?}: {:?}",
                p.anomalies
            ),
            Some(words) => {
                assert_eq!(p.anomalies.len(), 1, "{want:?} {live:?}");
                assert_eq!(p.anomalies[0].path, "spec.pool");
                assert!(
                    p.anomalies[0].message.contains(words),
                    "{}",
                    p.anomalies[0].message
                );
            }
        }
    }
}
