//! The storage migrations an upgrade shows: those the operator runs for the providers it moves.
//! Pure: the migrations as this process knows them are given.

use std::collections::HashMap;

use crate::api::{KindNames, PlannedMove, StepState, StorageMigration};
use crate::controller::install::storage::Progress;

/// `known` (what the status shows) updated with `running` (the operator's migrations, by CRD):
/// the migrations of the CRDs a move of `plan` changes the storage version of, and any still
/// under way of a provider it moves (one cut short before, going on).
pub fn storage_migrations(
    namespace: &str,
    plan: &[PlannedMove],
    known: &[StorageMigration],
    running: &HashMap<String, Progress>,
) -> Vec<StorageMigration> {
    let mut all: Vec<StorageMigration> = known.to_vec();
    for (crd, progress) in running {
        let key = &progress.provider;
        let Some(m) = plan.iter().find(|m| m.kind == key.kind.kind() && m.name == key.name) else { continue };
        let planned = m
            .objects
            .as_ref()
            .is_some_and(|o| o.storage_versions.iter().any(|s| s.split(':').next() == Some(crd.as_str())));
        // A migration this plan did not foresee shows only while it runs (one cut short before).
        if key.namespace != namespace || (!planned && progress.done) {
            continue;
        }
        let entry = StorageMigration {
            crd: crd.clone(),
            provider: format!("{} {}", m.kind, m.name),
            version: progress.storage.clone(),
            written: progress.migrated.rewritten as i64,
            gone: progress.migrated.gone as i64,
            state: if progress.done { StepState::Succeeded } else { StepState::Running },
        };
        match all.iter_mut().find(|e| e.crd == entry.crd) {
            Some(e) => *e = entry,
            None => all.push(entry),
        }
    }
    all.sort_by(|a, b| a.crd.cmp(&b.crd));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ObjectChanges, ProviderKind};
    use crate::controller::install::storage::Migrated;
    use crate::controller::vocabulary::ProviderKey;

    fn progress(name: &str, rewritten: usize, done: bool) -> Progress {
        Progress {
            provider: ProviderKey::new(ProviderKind::Infrastructure, "ns", name),
            storage: "v1beta1".into(),
            migrated: Migrated { rewritten, gone: 1 },
            done,
        }
    }

    #[test]
    fn an_upgrade_shows_the_migrations_of_the_crds_its_moves_change() {
        let plan = [PlannedMove {
            kind: "InfrastructureProvider".into(),
            name: "widget".into(),
            from: Some("v1.0.0".into()),
            to: "v2.0.0".into(),
            objects: Some(ObjectChanges {
                storage_versions: vec!["gadgets.widget.test.io: v1alpha1 -> v1beta1".into()],
                ..Default::default()
            }),
        }];
        let mut running = HashMap::new();
        running.insert("gadgets.widget.test.io".to_string(), progress("widget", 500, false));
        // Done before, and not a CRD the plan moves: another upgrade's.
        running.insert("doohickeys.widget.test.io".to_string(), progress("widget", 9, true));
        // Another provider's.
        running.insert("things.other.test.io".to_string(), progress("other", 3, false));
        let shown = storage_migrations("ns", &plan, &[], &running);
        assert_eq!(
            shown,
            [StorageMigration {
                crd: "gadgets.widget.test.io".into(),
                provider: "InfrastructureProvider widget".into(),
                version: "v1beta1".into(),
                written: 500,
                gone: 1,
                state: StepState::Running,
            }]
        );
        running.insert("gadgets.widget.test.io".to_string(), progress("widget", 1000, true));
        let later = storage_migrations("ns", &plan, &shown, &running);
        assert_eq!((later[0].written, later[0].state), (1000, StepState::Succeeded));
        // Kept when this process no longer knows it (after a restart).
        assert_eq!(storage_migrations("ns", &plan, &later, &HashMap::new()), later);
        assert!(storage_migrations("elsewhere", &plan, &[], &running).is_empty());
    }
}
