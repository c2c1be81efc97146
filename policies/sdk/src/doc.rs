//! Reading a manifest as a policy receives it: the JSON of the YAML as written (secrets are
//! references such as `ci-password-ref`, never values).

use serde_json::Value;

/// A manifest document with path-based accessors.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc(pub Value);

impl Doc {
    /// Parse the JSON text the host sends; anything unparsable reads as an empty document.
    pub fn parse(json: &str) -> Doc {
        Doc(serde_json::from_str(json).unwrap_or(Value::Null))
    }

    /// The value at a dotted path with optional indexes: `spec.networks[1].bridge`.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let mut cur = &self.0;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            let (key, indexes) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if !key.is_empty() {
                cur = cur.get(key)?;
            }
            for index in indexes.split('[').filter(|s| !s.is_empty()) {
                let n: usize = index.strip_suffix(']')?.parse().ok()?;
                cur = cur.get(n)?;
            }
        }
        Some(cur)
    }

    pub fn str_at(&self, path: &str) -> Option<&str> {
        self.get(path).and_then(Value::as_str)
    }

    /// An unsigned integer, also when written as a string of digits.
    pub fn u64_at(&self, path: &str) -> Option<u64> {
        match self.get(path)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A flag: `true`, `1` or `"1"`/`"true"`/`"yes"`/`"on"` read as true.
    pub fn bool_at(&self, path: &str) -> Option<bool> {
        match self.get(path)? {
            Value::Bool(b) => Some(*b),
            Value::Number(n) => n.as_u64().map(|n| n != 0),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Some(true),
                "0" | "false" | "no" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// The entries of a list (empty when absent or not a list).
    pub fn list_at(&self, path: &str) -> &[Value] {
        self.get(path)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn kind(&self) -> Option<&str> {
        self.str_at("kind")
    }

    pub fn name(&self) -> Option<&str> {
        self.str_at("metadata.name")
    }

    /// `spec.tags`, lower-cased (PVE tags are case-insensitive).
    pub fn tags(&self) -> Vec<String> {
        self.list_at("spec.tags")
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .collect()
    }

    /// `metadata.annotations.<key>` (keys may contain dots and slashes).
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.0
            .get("metadata")?
            .get("annotations")?
            .get(key)?
            .as_str()
    }

    /// `metadata.labels.<key>`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.0.get("metadata")?.get("labels")?.get(key)?.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_paths() {
        let d = Doc(json!({
            "kind": "VM",
            "metadata": {"name": "web", "annotations": {"proxops.io/approve": "ticket-1"}},
            "spec": {"tags": ["Prod"], "memory": "2GiB", "cpu": {"cores": "4"},
                     "networks": [{"bridge": "vmbr0"}, {"bridge": "vmbr1", "vlan": 30}],
                     "options": {"protection": true}}
        }));
        assert_eq!(d.kind(), Some("VM"));
        assert_eq!(d.name(), Some("web"));
        assert_eq!(d.str_at("spec.networks[1].bridge"), Some("vmbr1"));
        assert_eq!(d.u64_at("spec.networks[1].vlan"), Some(30));
        assert_eq!(d.u64_at("spec.cpu.cores"), Some(4));
        assert_eq!(d.get("spec.networks[2]"), None);
        assert_eq!(d.bool_at("spec.options.protection"), Some(true));
        assert_eq!(d.tags(), vec!["prod".to_string()]);
        assert_eq!(d.annotation("proxops.io/approve"), Some("ticket-1"));
        assert_eq!(d.label("x"), None);
        assert_eq!(d.list_at("spec.networks").len(), 2);
        assert_eq!(Doc::parse("not json").kind(), None);
    }
}
