//! `ObjectId`: the one identity of a managed object (cluster, kind, name), used by the engine
//! from validation to the apply summary.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which object: a manifest's cluster, kind and `metadata.name`. Two manifests with the same
/// id are a validation error, so within a repository it names exactly one manifest.
///
/// Displayed one way, `Kind/name`: the cluster is the section the object is shown in (every
/// report and log line is grouped by cluster), and `in_cluster` spells it out where objects of
/// several clusters meet (the dependency graph).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectId {
    /// Empty in a plan file written by hand that leaves it out (its cluster section names it).
    #[serde(default)]
    pub cluster: String,
    pub kind: String,
    pub name: String,
}

impl ObjectId {
    pub fn new(
        cluster: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectId {
            cluster: cluster.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    /// Another object of the same cluster (a reference).
    pub fn sibling(&self, kind: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectId::new(self.cluster.clone(), kind, name)
    }

    /// `cluster/Kind/name`, for views that mix clusters.
    pub fn in_cluster(&self) -> String {
        format!("{}/{}/{}", self.cluster, self.kind, self.name)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::ObjectId;
    use std::collections::HashSet;

    #[test]
    fn an_id_is_equal_only_to_the_same_cluster_kind_and_name() {
        let web = ObjectId::new("lab", "VM", "web");
        let ids: HashSet<ObjectId> = [
            web.clone(),
            web.sibling("DiskImage", "web"),
            ObjectId::new("prod", "VM", "web"),
            ObjectId::new("lab", "VM", "web"),
        ]
        .into_iter()
        .collect();
        assert_eq!(ids.len(), 3);
        assert_eq!(web.to_string(), "VM/web");
        assert_eq!(web.in_cluster(), "lab/VM/web");
    }
}
