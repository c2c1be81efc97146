//! Entries of live listings (`/cluster/resources`, or a kind's own): each kept as the JSON
//! text PVE sent, which is what kinds are given, with its top-level scalar fields read once
//! for the host (ids, types, nodes, tags).
//!
//! A `/cluster/resources` of 10,000 guests is 2.8 MB of JSON: read into `serde_json::Value`
//! it took 39 MB and 137 ms, each entry a map of 18 fields; as text and scalars it is a
//! fraction of that, and nothing is printed back to JSON for the kinds.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

/// A top-level field of a listing entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    Str(Box<str>),
    Num(Number),
    Bool(bool),
    Null,
    /// An object or a list: the host reads none; kinds read them from the entry's text.
    Nested,
}

impl Field {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Field::Num(n) => n.as_u64(),
            _ => None,
        }
    }

    /// An id: a string, or a number as written.
    pub fn id(&self) -> Option<Cow<'_, str>> {
        match self {
            Field::Str(s) => Some(Cow::Borrowed(s)),
            Field::Num(n) => Some(Cow::Owned(n.to_string())),
            _ => None,
        }
    }

    /// PVE's flags: `true`, `1` or `"1"`.
    pub fn flag(&self) -> bool {
        match self {
            Field::Bool(b) => *b,
            Field::Num(n) => n.as_u64() == Some(1),
            Field::Str(s) => &**s == "1",
            _ => false,
        }
    }
}

/// One entry of a live listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    text: Box<str>,
    /// In the order PVE sent them; an entry that is not an object has none.
    fields: Vec<(Box<str>, Field)>,
}

impl Entry {
    /// The entry of JSON text `text`.
    pub fn parse(text: &str) -> Result<Entry, serde_json::Error> {
        let Fields(fields) = serde_json::from_str(text)?;
        Ok(Entry {
            text: text.into(),
            fields,
        })
    }

    /// The entry of a JSON value (tests, and callers that built one).
    pub fn from_value(value: &Value) -> Entry {
        Entry::parse(&value.to_string()).expect("a printed JSON value reads back")
    }

    /// The entry with one more field `key` holding `json` (a JSON text; the host reads none
    /// of it), appended to its text without reading the rest again. `None` when the entry is
    /// not an object or already has the field.
    pub fn with_nested(&self, key: &str, json: &str) -> Option<Entry> {
        if self.get(key).is_some() {
            return None;
        }
        let body = self.text.trim_end().strip_suffix('}')?.trim_end();
        let comma = if body.ends_with('{') { "" } else { "," };
        let name = serde_json::to_string(key).ok()?;
        let mut fields = self.fields.clone();
        fields.push((key.into(), Field::Nested));
        Some(Entry {
            text: format!("{body}{comma}{name}:{json}}}").into(),
            fields,
        })
    }

    /// The entry as PVE sent it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The entry as a JSON value (read from its text again).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.text).expect("the entry's text is JSON")
    }

    pub fn get(&self, field: &str) -> Option<&Field> {
        self.fields
            .iter()
            .find(|(name, _)| &**name == field)
            .map(|(_, value)| value)
    }

    /// The field as a string, if it is one.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.get(field)?.as_str()
    }
}

/// Entries from which [`entries`] reads a listing on several threads.
const PARALLEL_ENTRIES: usize = 2048;

/// The entries of a listing's `data` text: a JSON list. `Err` names what it was instead.
pub fn entries(text: &str) -> Result<Vec<Entry>, String> {
    let parse = |r: &&RawValue| Entry::parse(r.get()).map_err(|e| e.to_string());
    match serde_json::from_str::<Vec<&RawValue>>(text) {
        // A cluster's listing is read while nothing else runs: a large one is read on every
        // core (10,000 guests took 12 ms on one).
        Ok(raw) if raw.len() >= PARALLEL_ENTRIES => {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            proxops_core::parallel::map_ordered(&raw, threads, || (), |_, r| parse(r))
                .into_iter()
                .collect()
        }
        Ok(raw) => raw.iter().map(parse).collect(),
        Err(_) => Err(match serde_json::from_str::<Value>(text) {
            Ok(Value::Null) => "null".into(),
            Ok(Value::Object(_)) => "an object".into(),
            Ok(_) => "a scalar".into(),
            Err(e) => format!("text that is not JSON ({e})"),
        }),
    }
}

/// An entry's top-level fields; anything but an object has none.
struct Fields(Vec<(Box<str>, Field)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a listing entry")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some(key) = map.next_key::<String>()? {
                    fields.push((key.into_boxed_str(), map.next_value::<Field>()?));
                }
                Ok(Fields(fields))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Fields, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Fields(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<Fields, E> {
                Ok(Fields(Vec::new()))
            }
        }
        d.deserialize_any(FieldsVisitor)
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl<'de> Visitor<'de> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<Field, E> {
                Ok(Field::Str(s.into()))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Field, E> {
                Ok(Field::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Field, E> {
                Ok(Field::Num(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Field, E> {
                Ok(Field::Num(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Field, E> {
                Ok(Number::from_f64(n).map_or(Field::Null, Field::Num))
            }
            fn visit_unit<E>(self) -> Result<Field, E> {
                Ok(Field::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Nested)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Field, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Field::Nested)
            }
        }
        d.deserialize_any(FieldVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_read_and_the_text_is_kept() {
        let text = r#"{"id":"qemu/100","type":"qemu","vmid":100,"template":1,"tags":"a;b","x":{"y":[1]},"n":null,"ok":true,"f":1.5,"esc":"a\"b"}"#;
        let e = Entry::parse(text).unwrap();
        assert_eq!(e.text(), text);
        assert_eq!(e.str("id"), Some("qemu/100"));
        assert_eq!(e.get("vmid").and_then(Field::as_u64), Some(100));
        assert_eq!(e.get("vmid").and_then(Field::id).as_deref(), Some("100"));
        assert!(e.get("template").is_some_and(Field::flag));
        assert_eq!(e.get("x"), Some(&Field::Nested));
        assert_eq!(e.get("n"), Some(&Field::Null));
        assert!(e.get("ok").is_some_and(Field::flag));
        assert_eq!(e.str("esc"), Some("a\"b"));
        assert_eq!(e.get("missing"), None);
        assert_eq!(e.value()["x"], json!({"y": [1]}));
        assert_eq!(Entry::from_value(&e.value()), e);
    }

    #[test]
    fn a_listing_must_be_a_list() {
        let check = |text: &str, expected: Result<usize, &str>| {
            let got = entries(text).map(|e| e.len());
            match (&got, &expected) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(a), Err(b)) => assert!(a.starts_with(b), "{text}: {a}"),
                _ => panic!("{text}: got {got:?}, expected {expected:?}"),
            }
        };
        check("[]", Ok(0));
        check(r#"[{"id":"a"}, {"id":"b"}, 3, "s", null, [1]]"#, Ok(6));
        check("null", Err("null"));
        check(r#"{"id": "a"}"#, Err("an object"));
        check("7", Err("a scalar"));
        check("[", Err("text that is not JSON"));
        // A scalar or a list as an entry has no fields.
        assert_eq!(entries("[3, [1]]").unwrap()[0].get("id"), None);
        // A large listing (read on several threads) keeps its order and its odd entries.
        let n = 3 * PARALLEL_ENTRIES;
        let large: Vec<Value> = (0..n)
            .map(|i| match i % 1000 {
                7 => json!(null),
                _ => json!({"id": format!("qemu/{i}"), "vmid": i}),
            })
            .collect();
        let read = entries(&Value::Array(large).to_string()).unwrap();
        assert_eq!(read.len(), n);
        for (i, e) in read.iter().enumerate() {
            let id = (i % 1000 != 7).then(|| format!("qemu/{i}"));
            assert_eq!(e.str("id"), id.as_deref(), "entry {i}");
        }
    }
}
