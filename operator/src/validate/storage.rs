//! `spec.storage` against the existing StatefulSet: the operator's own copy of the CRD's storage
//! rules (no removal, no addition, same size, same StorageClass; see
//! [`crate::crd::rules::storage_removed_rule`], [`crate::crd::rules::storage_added_rule`],
//! [`crate::crd::rules::storage_size_rule`] and [`crate::crd::rules::storage_class_rule`]).
//!
//! The reconciler never sees the previous spec, only the current one, so the old state it
//! compares with is the observed StatefulSet's volume claim template: what the operator
//! rendered from the storage the cluster was created with, which Kubernetes does not let
//! change. A difference can only get past admission where the CRD's rules were bypassed (a CRD
//! installed without them); it is refused as `Degraded`/`StorageImmutable` with the admission
//! rule's message, before anything is applied, rather than failing every StatefulSet apply. The
//! retention policy is not compared: the StatefulSet's field may change. Pure.

use k8s_openapi::api::apps::v1::StatefulSet;

use super::Problem;
use crate::crd::StorageSpec;
use crate::crd::conditions::Reason;
use crate::crd::rules::{
    STORAGE_ADDED_MESSAGE, STORAGE_CLASS_MESSAGE, STORAGE_REMOVED_MESSAGE, STORAGE_SIZE_MESSAGE,
};
use crate::names::DATA_VOLUME;
use crate::quantity::parse_nanos;

/// The size and StorageClass of a StatefulSet's data volume claim template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedClaim {
    /// `resources.requests.storage`, as stored.
    pub size: Option<String>,
    /// `storageClassName`, as stored.
    pub storage_class_name: Option<String>,
}

/// The data claim template ([`DATA_VOLUME`]) of `sts`, `None` when it has none.
pub fn rendered_claim(sts: &StatefulSet) -> Option<RenderedClaim> {
    let template = sts
        .spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(DATA_VOLUME))?;
    let spec = template.spec.as_ref();
    Some(RenderedClaim {
        size: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone()),
        storage_class_name: spec.and_then(|s| s.storage_class_name.clone()),
    })
}

/// Whether two quantities are the same amount (`10Gi` and `10240Mi` are); text that does not
/// parse is compared as text.
fn same_quantity(a: &str, b: &str) -> bool {
    match (parse_nanos(a), parse_nanos(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn refused(message: String) -> Problem {
    Problem {
        reason: Reason::StorageImmutable,
        message,
    }
}

/// What is wrong with `storage` given the cluster's existing StatefulSet `observed` (none yet:
/// nothing to compare with), or `None` when the claim template would stay as it is.
pub fn storage_problem(
    storage: Option<&StorageSpec>,
    observed: Option<&StatefulSet>,
) -> Option<Problem> {
    let claim = rendered_claim(observed?);
    match (storage, claim) {
        (None, None) => None,
        (None, Some(_)) => Some(refused(STORAGE_REMOVED_MESSAGE.to_string())),
        (Some(_), None) => Some(refused(STORAGE_ADDED_MESSAGE.to_string())),
        (Some(s), Some(c)) => {
            let old_size = c.size.unwrap_or_default();
            if !same_quantity(s.size.as_str(), &old_size) {
                return Some(refused(format!(
                    "{STORAGE_SIZE_MESSAGE} (the StatefulSet's claims request {old_size}, spec.storage.size is {})",
                    s.size
                )));
            }
            if s.storage_class_name != c.storage_class_name {
                let name = |c: &Option<String>| c.clone().unwrap_or_else(|| "unset".to_string());
                return Some(refused(format!(
                    "{STORAGE_CLASS_MESSAGE} (the StatefulSet's claims have {}, spec.storage.storageClassName is {})",
                    name(&c.storage_class_name),
                    name(&s.storage_class_name)
                )));
            }
            None
        }
    }
}
