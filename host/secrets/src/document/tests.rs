use super::*;

fn s(v: &str) -> Value {
    Value::Leaf(Leaf {
        kind: Kind::Str,
        text: Zeroizing::new(v.to_owned()),
    })
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

fn doc() -> SopsDocument {
    SopsDocument {
        file: PathBuf::from("test.sops.yaml"),
        root: map(vec![
            (
                "keys",
                map(vec![
                    ("a.b", s("dotted key")),
                    ("a", map(vec![("b", s("nested")), ("c", s("only nested"))])),
                    ("x.y", map(vec![("z", s("under a dotted key"))])),
                    ("x", s("a string")),
                ]),
            ),
            ("n", Value::Null),
        ]),
    }
}

#[test]
fn dotted_keys_prefer_the_longest_match() {
    let doc = doc();
    for (path, want) in [
        ("keys.a.b", Ok("dotted key")),
        ("keys.a.c", Ok("only nested")),
        // `keys.x` is a string, but the dotted key `x.y` leads on.
        ("keys.x.y.z", Ok("under a dotted key")),
        ("keys.x", Ok("a string")),
        ("keys.a.d", Err(LookupError::Missing)),
        ("n", Err(LookupError::Empty)),
    ] {
        assert_eq!(doc.get(path), want, "{path}");
    }
    assert!(matches!(doc.get("n.x"), Err(LookupError::Invalid(m)) if m.contains("`n` is null")));
    assert!(
        matches!(doc.get("keys.x.q"), Err(LookupError::Invalid(m)) if m.contains("`keys.x` is a string"))
    );
    let paths: Vec<_> = doc.entries("keys").into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["keys.a.b", "keys.a.b", "keys.a.c", "keys.x.y.z", "keys.x"]
    );
}

#[test]
fn debug_shows_no_values() {
    let debug = format!("{:?}", doc());
    assert_eq!(
        debug,
        "SopsDocument { file: \"test.sops.yaml\", values: 6, .. }"
    );
}
