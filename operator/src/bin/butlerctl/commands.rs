//! What each command that talks to a cluster does: read the flags, reach the cluster, call
//! the library, and say what happened.

use std::path::PathBuf;

use butler_operator::cli;

use crate::flags::*;

pub(crate) async fn describe(
    namespace: Option<String>,
    output: &str,
    cluster: &KubeFlags,
) -> Result<cli::Output, cli::GenerateError> {
    let format: cli::describe::Format = output.parse().map_err(cli::GenerateError::CommandLine)?;
    let client = cluster.client().await?;
    let rows = butler_operator::upgrade::providers::list(&client, namespace.as_deref())
        .await
        .map_err(cli::GenerateError::Cluster)?;
    let color =
        std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none();
    // Provider objects that no operator honours: nothing serves them, and nobody writes their
    // status, so this is where it is said.
    let not_honoured = match cli::honoured::operators(&client).await {
        Some(operators) => cli::honoured::not_honoured(&operators, rows.iter().map(|r| r.namespace.as_str())),
        None => Vec::new(),
    };
    let stdout = cli::describe::render(&rows, format, jiff::Timestamp::now(), color, &not_honoured);
    let stderr = match format {
        cli::describe::Format::Tree => Vec::new(),
        _ => not_honoured.iter().map(|(_, why)| format!("warning: {why}")).collect(),
    };
    Ok(cli::Output { stdout, stderr })
}

pub(crate) async fn plan(
    target: TargetFlags,
    namespace: Option<String>,
    diff: bool,
    config: Option<PathBuf>,
    timeout: u64,
    cluster: &KubeFlags,
) -> Result<cli::Output, cli::GenerateError> {
    if let Some((wanted, namespace)) = target.wanted(namespace.clone())? {
        if diff || config.is_some() {
            return Err(cli::GenerateError::CommandLine(
                "--diff and --config belong to the overview: with a target the operator plans, with its own config, and counts the object changes always".into(),
            ));
        }
        let client = cluster.client().await?;
        let waits = cli::apply::Waits {
            timeout: std::time::Duration::from_secs(timeout),
            poll: std::time::Duration::from_millis(500),
        };
        let stdout = cli::follow::upgrade_plan(&client, namespace.as_deref(), &wanted, waits)
            .await
            .map_err(cli::GenerateError::Cluster)?;
        return Ok(cli::Output { stdout, stderr: Vec::new() });
    }
    let config = butler_repository::ClusterctlConfig::load(config.as_deref())?;
    let client = cluster.client().await?;
    eprintln!("Checking new release availability...\n");
    let plans = cli::plan::upgrade_plan(
        &client,
        namespace.as_deref(),
        &config,
        &butler_repository::RemoteOptions::from_env(),
        diff,
    )
    .await
    .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout: cli::plan::render_plan(&plans), stderr: Vec::new() })
}

pub(crate) async fn apply(f: ApplyFlags) -> Result<cli::Output, cli::GenerateError> {
    let Some((wanted, namespace)) = f.target.wanted(f.namespace.clone())? else {
        return Err(cli::GenerateError::CommandLine(
            "give --contract CONTRACT, or the providers to upgrade (--core NAME:VERSION, --infrastructure NAME:VERSION, ...)".into(),
        ));
    };
    let client = f.cluster.client().await?;
    let waits = cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.timeout),
        poll: std::time::Duration::from_millis(500),
    };
    let stdout = cli::follow::upgrade_apply(&client, namespace.as_deref(), &wanted, waits, &|line| {
        eprintln!("{line}")
    })
    .await
    .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

pub(crate) async fn delete(f: DeleteFlags) -> Result<cli::Output, cli::GenerateError> {
    let usage = cli::GenerateError::CommandLine;
    let mut namespace = f.namespace.clone();
    let which = if f.all {
        cli::delete::Which::All
    } else {
        // Names; a version given by habit (harvester:v0.1.0) names the same provider.
        let mut labels = Vec::new();
        let mut named = Vec::new();
        for (type_, item) in f.providers.items() {
            let one = cli::provider_ref::parse(&item).map_err(usage)?;
            labels.push(type_.label(&one.name));
            named.push(one);
        }
        if labels.is_empty() {
            return Err(usage(
                "give --all, or the providers to delete (--core NAME, --infrastructure NAME, ...)".into(),
            ));
        }
        namespace = cli::provider_ref::one_namespace(f.namespace.clone(), &named).map_err(usage)?;
        cli::delete::Which::Labels(labels)
    };
    let client = f.cluster.client().await?;
    let waits = cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.timeout),
        poll: std::time::Duration::from_millis(500),
    };
    let progress = |line: &str| eprintln!("{line}");
    let namespaces: Vec<String> = cli::delete::chosen(&client, namespace.as_deref(), &which)
        .await
        .map_err(cli::GenerateError::Cluster)?
        .into_iter()
        .map(|r| r.namespace)
        .collect();
    let mut stdout =
        cli::delete::delete(&client, namespace.as_deref(), &which, f.include_crd, waits, &progress)
            .await
            .map_err(cli::GenerateError::Cluster)?;
    if f.include_namespace {
        stdout += &cli::delete::delete_namespaces(&client, &namespaces, &progress)
            .await
            .map_err(cli::GenerateError::Cluster)?;
    }
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

pub(crate) async fn migrate(f: MigrateFlags) -> Result<cli::Output, cli::GenerateError> {
    if !f.from_file.is_empty() {
        let mut files = Vec::new();
        for path in &f.from_file {
            let text = match path.to_str() {
                Some("-") => std::io::read_to_string(std::io::stdin()),
                _ => std::fs::read_to_string(path),
            }
            .map_err(|e| cli::GenerateError::Usage(format!("cannot read {}: {e}", path.display())))?;
            files.push((path.display().to_string(), text));
        }
        let running = match f.versions_from_cluster {
            true => {
                let client = f.cluster.client().await?;
                cli::migrate::files::running_versions(&client).await.map_err(cli::GenerateError::Cluster)?
            }
            false => Default::default(),
        };
        let converted =
            cli::migrate::files::convert_with(&files, &running).map_err(cli::GenerateError::Usage)?;
        if !converted.unversioned.is_empty() {
            return Err(cli::GenerateError::Usage(format!(
                "these provider objects say no version: {}; applied from Git as they are, this operator would install the newest release (across contracts, unpaused). Run again with --versions-from-cluster to write the versions that run (read with the kubeconfig), or set spec.version in the files",
                converted.unversioned.join(", ")
            )));
        }
        let mut stderr = converted.report;
        stderr.push(format!("{} provider objects converted", converted.providers));
        return Ok(cli::Output { stdout: converted.yaml, stderr });
    }
    let old_operator = match f.old_operator.as_deref() {
        None => None,
        Some(text) => match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                Some((ns.to_string(), name.to_string()))
            }
            _ => {
                return Err(cli::GenerateError::CommandLine(format!(
                    "--old-operator {text}: give the Deployment as NAMESPACE/NAME"
                )));
            }
        },
    };
    let options = cli::migrate::Options {
        namespace: f.namespace,
        old_operator,
        dry_run: f.dry_run,
        leave_unsupported: f.leave_unsupported,
        copy_secrets: f.copy_secrets,
        gitops_paused: f.gitops_paused,
        waits: cli::apply::Waits {
            timeout: std::time::Duration::from_secs(f.timeout),
            poll: std::time::Duration::from_millis(500),
        },
    };
    let client = f.cluster.client().await?;
    let stdout = cli::migrate::migrate(&client, &options, &|line| eprintln!("{line}"))
        .await
        .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

pub(crate) async fn airgap(what: Airgap) -> Result<cli::Output, cli::GenerateError> {
    match what {
        Airgap::Pack { providers, config, output } => {
            let providers = providers.items();
            let files = cli::airgap::pack_files(&providers, config.as_deref()).await?;
            let written = cli::airgap::write_bundle(&output, &files)?;
            Ok(cli::airgap::packed(&written))
        }
        Airgap::Load { file, namespace, skip_operator, cluster } => {
            let files = cli::airgap::read_bundle(&file)?;
            let client = cluster.client().await?;
            let stdout =
                cli::airgap::load(&client, &files, &namespace, skip_operator, &|l| eprintln!("{l}")).await?;
            Ok(cli::Output { stdout, stderr: Vec::new() })
        }
    }
}

pub(crate) async fn init(f: InitFlags) -> Result<cli::Output, cli::GenerateError> {
    let providers = f.providers.items();
    let config = butler_repository::ClusterctlConfig::load(f.config.as_deref())?;
    let mut operator_rules = Vec::new();
    if f.upstream_rbac {
        operator_rules.extend(butler_operator::manifest::upstream_rules());
    }
    if let Some(path) = &f.operator_rules {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cli::GenerateError::Usage(format!("cannot read {}: {e}", path.display())))?;
        let rules = butler_operator::manifest::parse_rules(&text)
            .map_err(|e| cli::GenerateError::Usage(format!("--operator-rules {}: {e}", path.display())))?;
        operator_rules.extend(rules);
    }
    if let Some(output) = &f.output {
        let args = cli::init::InitArgs {
            providers,
            target_namespace: f.target_namespace,
            operator_image: f.operator_image,
            operator_rules: operator_rules.clone(),
            explicit: Default::default(),
            existing_cores: Vec::new(),
            config_secret: f.config_secret.clone(),
        };
        let plan = cli::init::plan(&args, &config, false).await?;
        let yaml = plan.to_gitops_yaml();
        let secrets = plan.secrets_to_create();
        let mut warning = plan.notes.clone();
        if !secrets.is_empty() {
            warning.push("the set names these config Secrets but holds none of their values (they do not belong in Git); create each in the cluster (kubectl create secret generic NAME -n NAMESPACE --from-literal=KEY=VALUE ...), or commit it encrypted (SOPS, Sealed Secrets):".to_string());
            warning.extend(secrets.iter().map(|s| format!("  Secret {s}")));
        }
        if output.as_os_str() == "-" {
            return Ok(cli::Output { stdout: yaml, stderr: warning });
        }
        std::fs::write(output, yaml)
            .map_err(|e| cli::GenerateError::Usage(format!("cannot write {}: {e}", output.display())))?;
        return Ok(cli::Output { stdout: format!("wrote {}\n", output.display()), stderr: warning });
    }
    let client = f.cluster.client().await?;
    let present = cli::init::operator_present(&client).await?;
    let existing_cores = match present {
        true => cli::init::existing_cores(&client).await?,
        false => Vec::new(),
    };
    let args = cli::init::InitArgs {
        providers,
        target_namespace: f.target_namespace,
        operator_image: f.operator_image,
        operator_rules,
        explicit: Default::default(),
        existing_cores,
        config_secret: f.config_secret,
    };
    let plan = cli::init::plan(&args, &config, present).await?;
    for note in &plan.notes {
        eprintln!("{note}");
    }
    if f.dry_run {
        return Ok(cli::Output { stdout: plan.to_yaml(), stderr: Vec::new() });
    }
    let waits = f.wait_providers.then(|| cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.wait_provider_timeout),
        poll: std::time::Duration::from_millis(500),
    });
    let stdout = cli::init::apply(&client, &plan, waits, &|l| eprintln!("{l}")).await?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}
