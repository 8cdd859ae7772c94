use super::*;
use crate::controller::install::preflight::preflight;
use crate::controller::report::reason::{INSTALLED, PREFLIGHT, Retry, UPGRADED};
use crate::controller::vocabulary::LABEL_NAME;

const COMPONENTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x-system\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: x-system\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: manager\n  namespace: x-system\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: ghcr.io/x/manager:v1\n        args: [\"--region=${REGION}\"]\n";

fn view(kind: ProviderKind, name: &str) -> ProviderView {
    ProviderView::sample(kind, "ns", name)
}

fn fetched(version: &str, contract: &str) -> Fetched {
    Fetched { version: version.parse().unwrap(), contract: contract.into(), components: COMPONENTS.into() }
}

fn region(name: &str) -> Option<String> {
    (name == "REGION").then(|| "eu".to_string())
}

fn plan(
    me: &ProviderView,
    all: &[ProviderView],
    fetched: &Fetched,
    inventory: Option<&Inventory>,
    live: &[LiveDeployment],
) -> InstallPlan {
    plan_shadowed(me, all, fetched, inventory, live, None)
}

/// [`plan`] of a provider whose name Butler's repository shadows, saying `shadow`.
fn plan_shadowed(
    me: &ProviderView,
    all: &[ProviderView],
    fetched: &Fetched,
    inventory: Option<&Inventory>,
    live: &[LiveDeployment],
    shadow: Option<&str>,
) -> InstallPlan {
    let spec = ProviderSpec::default();
    let images = ImageOverrides::default();
    plan_install(&InstallInput {
        me,
        spec: &spec,
        all,
        fetched,
        variables: &region,
        inventory,
        live,
        images: &images,
        ceiling: None,
        policy: &Default::default(),
        additional: None,
        rollback_to: None,
        renders: &Default::default(),
        shadow,
    })
}

fn condition<'a>(plan: &'a InstallPlan, type_: &str) -> &'a Wanted {
    plan.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", plan.conditions))
}

#[test]
fn versions_bumped_together_move_the_core_provider_first() {
    let mut core = view(ProviderKind::Core, "cluster-api");
    core.wanted_version = Some("v1.0.1".into());
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    // The view and the spec are of one object: both ask for v1.0.1.
    aws.wanted_version = Some("v1.0.1".into());
    let bumped = ProviderSpec { version: Some("v1.0.1".into()), ..Default::default() };
    let waiting = preflight(&aws, &bumped, &[core.clone(), aws.clone()], true).unwrap_err();
    assert_eq!(waiting.reason, Reason::WaitingForCoreProvider);
    assert!(waiting.message.contains("move to v1.0.1 first"), "{}", waiting.message);
    // Nothing asked of this provider's version: it goes on as it is.
    let mut steady = aws.clone();
    steady.wanted_version = None;
    assert_eq!(preflight(&steady, &ProviderSpec::default(), &[core.clone(), steady.clone()], true), Ok(()));
    // A pause (a contract move) goes on: the core provider waits for it.
    let mut paused = aws.clone();
    paused.paused = true;
    assert_eq!(preflight(&paused, &bumped, &[core.clone(), paused.clone()], true), Ok(()));
    // Once the core provider runs its new version, the others move.
    core.installed_version = Some("v1.0.1".into());
    assert_eq!(preflight(&aws, &bumped, &[core, aws.clone()], true), Ok(()));
}

#[test]
fn preflight_names_each_failure() {
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    aws.contract = None;
    let spec = ProviderSpec::default();
    assert_eq!(preflight(&aws, &spec, &[core.clone(), aws.clone()], true), Ok(()));

    let mut twin = aws.clone();
    twin.key.namespace = "other".into();
    twin.created = "2025-12-31T00:00:00Z".into();
    assert_eq!(
        preflight(&aws, &spec, &[core.clone(), twin.clone(), aws.clone()], true).unwrap_err().reason,
        Reason::DuplicateProvider
    );
    assert_eq!(
        preflight(&twin, &spec, &[core.clone(), twin.clone(), aws.clone()], true),
        Ok(()),
        "the older one proceeds"
    );

    let both: ProviderSpec = serde_saphyr::from_str("fetchConfig: {url: x, selector: {}}\n").unwrap();
    assert_eq!(
        preflight(&aws, &both, std::slice::from_ref(&core), true).unwrap_err().reason,
        Reason::InvalidFetchConfig
    );
    let unknown =
        preflight(&view(ProviderKind::Infrastructure, "vsphere"), &spec, std::slice::from_ref(&core), false)
            .unwrap_err();
    assert_eq!(unknown.reason, Reason::UnknownProvider);
    assert!(unknown.message.contains("add spec.fetchConfig"), "{}", unknown.message);
    let bad: ProviderSpec = serde_saphyr::from_str("version: latest-ish\n").unwrap();
    assert_eq!(
        preflight(&aws, &bad, std::slice::from_ref(&core), true).unwrap_err().reason,
        Reason::InvalidVersion
    );

    let mut second_core = view(ProviderKind::Core, "cluster-api");
    second_core.key.namespace = "capi-system".into();
    second_core.created = "2026-02-01T00:00:00Z".into();
    let refused = preflight(&second_core, &spec, &[core.clone(), second_core.clone()], true).unwrap_err();
    assert_eq!(refused.reason, Reason::DuplicateProvider);
    assert!(
        refused.message.contains("CoreProvider ns/butler exists already; a cluster has one core provider"),
        "{}",
        refused.message
    );
    assert_eq!(
        preflight(&core, &spec, &[core.clone(), second_core.clone()], true),
        Ok(()),
        "the first stays"
    );

    let elsewhere: ProviderSpec =
        serde_saphyr::from_str("configSecret: {name: creds, namespace: kube-system}\n").unwrap();
    let refused = preflight(&aws, &elsewhere, std::slice::from_ref(&core), true).unwrap_err();
    assert_eq!(refused.reason, Reason::ConfigSecretUnreadable);
    assert!(
        refused
            .message
            .contains("spec.configSecret.namespace \"kube-system\" is not the provider's namespace \"ns\""),
        "{}",
        refused.message
    );
    let here: ProviderSpec = serde_saphyr::from_str("configSecret: {name: creds, namespace: ns}\n").unwrap();
    assert_eq!(preflight(&aws, &here, &[core.clone(), aws.clone()], true), Ok(()));

    let mut installing = core.clone();
    installing.installed_version = None;
    let waiting = preflight(&aws, &spec, &[installing], true).unwrap_err();
    assert_eq!((waiting.reason, waiting.reason.retry()), (Reason::WaitingForCoreProvider, Retry::OnChange));
    assert_eq!(preflight(&aws, &spec, &[], true).unwrap_err().reason, Reason::WaitingForCoreProvider);
}

#[test]
fn an_install_renders_labels_and_records_the_objects() {
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    aws.contract = None;
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v1.0.0", "v1beta1"), None, &[]);
    assert!(p.changed);
    assert_eq!(p.objects.len(), 2, "the Namespace is the provider's own, and left alone");
    assert_eq!(p.objects[0]["metadata"]["namespace"], "ns", "objects go to the provider's namespace");
    let deployment = &p.objects[1];
    assert_eq!(deployment["metadata"]["labels"][LABEL_NAME], "aws");
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["args"][0], "--region=eu");
    assert_eq!(p.inventory.objects.len(), 2);
    assert_eq!((p.contract.as_deref(), p.installed_version.as_deref()), (Some("v1beta1"), Some("v1.0.0")));
    assert!(condition(&p, INSTALLED).status);
    assert_eq!(p.events, [(Reason::Installed, "installed v1.0.0".to_string())]);
    // A name Butler's repository shadows says so, on the condition and in the event.
    let note = "aws names Butler's own InfrastructureProvider aws";
    let shadowed = plan_shadowed(
        &aws,
        &[core.clone(), aws.clone()],
        &fetched("v1.0.0", "v1beta1"),
        None,
        &[],
        Some(note),
    );
    assert!(
        condition(&shadowed, INSTALLED)
            .message
            .ends_with("; aws names Butler's own InfrastructureProvider aws")
    );
    assert_eq!(shadowed.events[0].1, "installed v1.0.0; aws names Butler's own InfrastructureProvider aws");

    // The same again: nothing to write.
    let mut installed = aws.clone();
    installed.installed_version = Some("v1.0.0".into());
    installed.contract = Some("v1beta1".into());
    let again =
        plan(&installed, &[core, installed.clone()], &fetched("v1.0.0", "v1beta1"), Some(&p.inventory), &[]);
    assert!(!again.changed && again.delete.is_empty() && again.events.is_empty());
}

#[test]
fn a_version_is_kept_as_written_and_a_respelling_is_no_upgrade() {
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("1.0.0", "v1beta1"), None, &[]);
    assert_eq!(p.installed_version.as_deref(), Some("1.0.0"), "status says the version as the spec wrote it");
    assert_eq!(p.inventory.version, "1.0.0");

    // Written with the v afterwards: the same version, nothing to apply and no upgrade.
    aws.installed_version = Some("1.0.0".into());
    let again = plan(&aws, &[core, aws.clone()], &fetched("v1.0.0", "v1beta1"), Some(&p.inventory), &[]);
    assert!(!again.changed && again.events.is_empty(), "{:?}", again.events);
    assert!(again.conditions.iter().all(|c| c.type_ != UPGRADED));
}

#[test]
fn an_upgrade_deletes_what_dropped_out_but_keeps_crds_and_the_namespace() {
    let core = view(ProviderKind::Core, "butler");
    let aws = view(ProviderKind::Infrastructure, "aws");
    let old = Inventory {
        version: "v1.0.0".into(),
        contract: "v1beta1".into(),
        digest: "old".into(),
        pending: Vec::new(),
        adopted: Vec::new(),
        migrating: Vec::new(),
        kept: Vec::new(),
        objects: vec![
            ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "dropped".into(),
            },
            ObjectRef {
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                namespace: None,
                name: "old.x.io".into(),
            },
            ObjectRef {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                namespace: None,
                name: "ns".into(),
            },
        ],
    };
    let p = plan(&aws, &[core, aws.clone()], &fetched("v1.1.0", "v1beta1"), Some(&old), &[]);
    assert_eq!(p.delete.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["dropped"]);
    assert_eq!(condition(&p, UPGRADED).message, "upgraded from v1.0.0 to v1.1.0");
    // The CRD that dropped out stays the provider's, listed as kept, for its deletion.
    assert_eq!(p.inventory.kept.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["old.x.io"]);
}

#[test]
fn kept_crds_stay_listed_until_a_release_ships_them_again() {
    let crd = |name: &str| ObjectRef {
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        namespace: None,
        name: name.into(),
    };
    let previous = Inventory {
        objects: vec![crd("devs.x.io"), crd("adopted.x.io"), crd("pending.x.io")],
        adopted: vec![crd("adopted.x.io")],
        pending: vec![crd("pending.x.io")],
        kept: vec![crd("dockers.x.io"), crd("back.x.io")],
        ..Inventory::default()
    };
    let kept =
        crate::controller::install::installed::kept_crds(&previous, &[crd("back.x.io"), crd("others.x.io")]);
    // Kept before and dropped now stay; one shipped again is an object again; one that was
    // there before the provider, or never known to be made by it, was never its to keep.
    assert_eq!(kept, [crd("dockers.x.io"), crd("devs.x.io")]);
}

#[test]
fn contract_changes_need_every_provider_paused() {
    let core = view(ProviderKind::Core, "butler");
    let aws = view(ProviderKind::Infrastructure, "aws");
    let refused = plan(&core, &[core.clone(), aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &[]);
    let upgraded = condition(&refused, UPGRADED);
    assert_eq!((upgraded.status, upgraded.reason.as_str()), (false, "ContractChangeNeedsPause"));
    assert!(
        upgraded.message.contains("Not paused: CoreProvider ns/butler, InfrastructureProvider ns/aws"),
        "{}",
        upgraded.message
    );
    assert!(refused.objects.is_empty() && !refused.changed);
    assert_eq!(refused.installed_version.as_deref(), Some("v1.0.0"), "what is installed stays");

    let mut paused_core = core.clone();
    paused_core.paused = true;
    let mut paused_aws = aws.clone();
    paused_aws.paused = true;
    // Asked to pause, but its Deployments still run (its pause was not carried out yet).
    let asked = plan(
        &paused_core,
        &[paused_core.clone(), paused_aws.clone()],
        &fetched("v2.0.0", "v1beta2"),
        None,
        &[],
    );
    let message = &condition(&asked, UPGRADED).message;
    assert!(
        message
            .contains("Pausing (spec.paused: true, Deployments not yet at 0): InfrastructureProvider ns/aws"),
        "the gate looks at what runs: {message}"
    );
    assert!(message.contains("this provider is paused at v1.0.0"), "{message}");
    // Asked to pause, refused the version: the pause happens at the version installed.
    assert_eq!(super::pause_first(&asked, &paused_core).as_deref(), Some("v1.0.0"));
    assert_eq!(super::pause_first(&refused, &core), None, "not asked to pause: nothing to carry out");
    // Ready says why, not that nothing is installed.
    let ready = super::readiness(&asked, &[]);
    assert_eq!((ready.status, ready.reason.as_str()), (false, "ContractChangeNeedsPause"));
    paused_aws.held = true;
    paused_core.held = true;
    // One that never installed runs nothing: it holds nothing up.
    let mut never = view(ProviderKind::Infrastructure, "broken");
    never.installed_version = None;
    never.contract = None;
    let with_never = [paused_core.clone(), paused_aws.clone(), never.clone()];
    let p = plan(&paused_core, &with_never, &fetched("v2.0.0", "v1beta2"), None, &[]);
    assert_eq!(p.installed_version.as_deref(), Some("v2.0.0"), "{:?}", p.conditions);
    let all = [paused_core.clone(), paused_aws.clone()];
    let live = [LiveDeployment {
        namespace: "ns".into(),
        name: "manager".into(),
        replicas: 2,
        available: true,
        paused_replicas: None,
    }];
    let p = plan(&paused_core, &all, &fetched("v2.0.0", "v1beta2"), None, &live);
    assert_eq!(p.contract.as_deref(), Some("v1beta2"));
    let deployment = p.objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 0, "installed at 0 replicas while paused");
    assert_eq!(deployment["metadata"]["annotations"][PAUSED_REPLICAS], "2", "the live count is remembered");
    assert!(condition(&p, PAUSED).status);

    // A paused infrastructure provider may install the new contract before the core's status says so.
    let p = plan(&paused_aws, &all, &fetched("v2.0.0", "v1beta2"), None, &live);
    assert_eq!(p.installed_version.as_deref(), Some("v2.0.0"));
    // Running, it may not.
    let p = plan(&aws, &[core, aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &[]);
    assert_eq!(condition(&p, PREFLIGHT).reason, "ContractMismatch");
}

#[test]
fn unpause_restores_replicas_or_is_refused_while_contracts_differ() {
    // A core of contract v1, which still supports no earlier contract.
    let mut core = view(ProviderKind::Core, "butler");
    core.contract = Some("v1".into());
    core.installed_version = Some("v3.0.0".into());
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.contract = Some("v1beta1".into());
    let live = [LiveDeployment {
        namespace: "ns".into(),
        name: "manager".into(),
        replicas: 0,
        available: false,
        paused_replicas: Some(3),
    }];
    let refused = plan(&core, &[core.clone(), aws.clone()], &fetched("v3.0.0", "v1"), None, &live);
    let paused = condition(&refused, PAUSED);
    assert_eq!((paused.status, paused.reason.as_str()), (true, "UnpauseRefused"));
    assert!(paused.message.contains("InfrastructureProvider ns/aws v1beta1"), "{}", paused.message);
    let deployment = refused.objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 0);

    aws.contract = Some("v1".into());
    let p = plan(&core, &[core.clone(), aws.clone()], &fetched("v3.0.0", "v1"), None, &live);
    let deployment = p.objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3, "the remembered count comes back");
    assert!(deployment["metadata"]["annotations"].get(PAUSED_REPLICAS).is_none());
    assert!(p.events.contains(&(Reason::Unpaused, "restored the provider's Deployments".to_string())));

    // A v1beta2 core still supports v1beta1 providers: no refusal.
    core.contract = Some("v1beta2".into());
    core.installed_version = Some("v2.0.0".into());
    aws.contract = Some("v1beta1".into());
    let p = plan(&core, &[core.clone(), aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &live);
    assert_eq!(condition(&p, PAUSED).reason, "Running", "{:?}", p.conditions);
}

#[test]
fn downgrades_across_minor_versions_are_refused() {
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = Some("v1.2.0".into());
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v1.1.9", "v1beta1"), None, &[]);
    assert_eq!(condition(&p, PREFLIGHT).reason, "DowngradeRefused");
    let p = plan(&aws, &[core, aws.clone()], &fetched("v1.2.0", "v1beta1"), None, &[]);
    assert!(condition(&p, PREFLIGHT).status);
}

#[test]
fn readiness_and_deletion_blockers() {
    let core = view(ProviderKind::Core, "butler");
    let aws = view(ProviderKind::Infrastructure, "aws");
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v1.0.0", "v1beta1"), None, &[]);
    let up = LiveDeployment {
        namespace: "ns".into(),
        name: "manager".into(),
        replicas: 1,
        available: true,
        paused_replicas: None,
    };
    assert!(readiness(&p, std::slice::from_ref(&up)).status);
    let down = LiveDeployment { available: false, ..up };
    assert_eq!(readiness(&p, &[down]).reason, "DeploymentsNotAvailable");
    assert!(
        deletion_blocker(&core, &[core.clone(), aws.clone()], &[])
            .unwrap()
            .contains("delete these first: InfrastructureProvider ns/aws")
    );
    assert!(
        deletion_blocker(&aws, &[core.clone(), aws.clone()], &["TenantCluster team-a/c1".into()])
            .unwrap()
            .contains("team-a/c1")
    );
    assert_eq!(deletion_blocker(&aws, &[core, aws.clone()], &[]), None);
}

#[test]
fn a_provider_held_by_a_refused_unpause_counts_as_paused() {
    let mut core = view(ProviderKind::Core, "butler");
    core.paused = true;
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.held = true; // spec.paused is false, but its unpause was refused: still at 0 replicas
    let p = plan(&core, &[core.clone(), aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &[]);
    assert_eq!(p.installed_version.as_deref(), Some("v2.0.0"), "{:?}", p.conditions);
}

#[test]
fn crds_are_applied_first_and_webhook_configurations_last() {
    let components = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: hook\n---\n{COMPONENTS}---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.x.io\nspec:\n  group: x.io\n  names: {{kind: Thing, plural: things}}\n  scope: Namespaced\n  versions: []\n"
    );
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    let release = Fetched { version: "v1.0.0".parse().unwrap(), contract: "v1beta1".into(), components };
    let p = plan(&aws, &[core, aws.clone()], &release, None, &[]);
    let kinds: Vec<&str> = p.objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["CustomResourceDefinition", "ServiceAccount", "Deployment", "ValidatingWebhookConfiguration"]
    );
}

#[test]
fn a_missing_variable_says_where_the_operator_takes_variables_from() {
    let core = view(ProviderKind::Core, "butler");
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    let spec = ProviderSpec::default();
    let images = ImageOverrides::default();
    let nothing = |_: &str| None;
    let all = [core, aws.clone()];
    let release = fetched("v1.0.0", "v1beta1");
    let p = plan_install(&InstallInput {
        me: &aws,
        spec: &spec,
        all: &all,
        fetched: &release,
        variables: &nothing,
        inventory: None,
        live: &[],
        images: &images,
        ceiling: None,
        policy: &Default::default(),
        additional: None,
        rollback_to: None,
        renders: &Default::default(),
        shadow: None,
    });
    let installed = condition(&p, INSTALLED);
    assert_eq!(installed.reason, "RenderFailed");
    assert_eq!(
        installed.message,
        "the variable REGION is not set; set it in the provider's config Secret (spec.configSecret) or in the operator's config file (--config)"
    );
}

#[test]
fn a_v1beta2_core_accepts_v1beta1_providers_and_says_so() {
    let mut core = view(ProviderKind::Core, "butler");
    core.contract = Some("v1beta2".into());
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    aws.contract = None;
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v1.0.0", "v1beta1"), None, &[]);
    let installed = condition(&p, INSTALLED);
    assert!(installed.status, "{:?}", p.conditions);
    assert_eq!(
        installed.message,
        "v1.0.0 is installed (contract v1beta1, which the core provider's v1beta2 still supports)"
    );

    // An older core never takes a newer provider, nor a v1beta2 core one two contracts back.
    core.contract = Some("v1beta1".into());
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &[]);
    let preflight = condition(&p, PREFLIGHT);
    assert_eq!((preflight.status, preflight.reason.as_str()), (false, "ContractMismatch"));
    assert!(preflight.message.contains("abides by v1beta1 and accepts v1beta1"), "{}", preflight.message);
    core.contract = Some("v1beta2".into());
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v0.9.0", "v1alpha4"), None, &[]);
    assert_eq!(condition(&p, PREFLIGHT).reason, "ContractMismatch");

    // A provider moving from v1beta1 to v1beta2 under a v1beta2 core needs nobody paused.
    aws.installed_version = Some("v1.0.0".into());
    aws.contract = Some("v1beta1".into());
    let p = plan(&aws, &[core.clone(), aws.clone()], &fetched("v2.0.0", "v1beta2"), None, &[]);
    assert_eq!(p.installed_version.as_deref(), Some("v2.0.0"), "{:?}", p.conditions);
}

#[test]
fn additional_manifests_are_customised_as_the_components_are() {
    // As cluster-api-operator adds them to the components before it customises them: a
    // Deployment of the additional manifests is set through spec.additionalDeployments by name,
    // and runs as an account of the release.
    let mut aws = view(ProviderKind::Infrastructure, "aws");
    aws.installed_version = None;
    let spec: ProviderSpec = serde_json::from_value(serde_json::json!({
        "additionalDeployments": {"agent": {"deployment": {"replicas": 3}}}
    }))
    .unwrap();
    let additional = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: agent\n  namespace: x-system\nspec:\n  replicas: 1\n  template:\n    spec:\n      serviceAccountName: sa\n      containers:\n      - name: agent\n        image: ghcr.io/x/agent:v1\n";
    let images = ImageOverrides::default();
    let all = [view(ProviderKind::Core, "butler"), aws.clone()];
    let release = fetched("v1.0.0", "v1beta1");
    let run = |additional: &str| {
        plan_install(&InstallInput {
            me: &aws,
            spec: &spec,
            all: &all,
            fetched: &release,
            variables: &region,
            inventory: None,
            live: &[],
            images: &images,
            ceiling: None,
            policy: &Default::default(),
            additional: Some(additional),
            rollback_to: None,
            renders: &Default::default(),
            shadow: None,
        })
    };
    let p = run(additional);
    let agent = p.objects.iter().find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "agent");
    assert_eq!(
        agent.map(|a| a["spec"]["replicas"].clone()),
        Some(serde_json::json!(3)),
        "{:?}",
        p.conditions
    );
    // An account outside the release is refused for them as for the components.
    let p = run(&additional.replace("serviceAccountName: sa", "serviceAccountName: someone-elses"));
    assert_eq!(condition(&p, INSTALLED).reason, "PolicyViolation", "{:?}", p.conditions);
}
