//! The `ferry` command: parses arguments and calls the crates.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use ferry_config::{Config, SiteMode};
use ferry_site::{Site, TokenKind};

mod archive_cmd;
mod audit_cmd;
mod files_cmd;
mod herd_cmd;
mod json_error;
mod mcp_cmd;
mod media_cmd;
mod node_cmd;
mod site_cmd;

#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "The file plane for AI-agent platforms"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct SiteArgs {
    /// The site's data directory.
    #[arg(long, env = "FERRY_DATA", default_value = "ferry-data", global = true)]
    data: PathBuf,
    /// The configuration file [default: <data>/ferry.toml when it exists].
    #[arg(long, env = "FERRY_CONFIG", global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the gateway: the HTTP API on a site, created on first start.
    Serve {
        #[command(flatten)]
        site: SiteArgs,
        /// Address to listen on (overrides server.listen).
        #[arg(long)]
        listen: Option<String>,
        /// Prints the effective configuration and exits.
        #[arg(long)]
        print_config: bool,
    },
    /// Manages people.
    Person {
        #[command(subcommand)]
        command: PersonCommand,
    },
    /// Manages access tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manages projects.
    Project {
        #[command(subcommand)]
        command: ProjectCommand,
    },
    /// Checks agent documents.
    Docs {
        #[command(subcommand)]
        command: DocsCommand,
    },
    /// Checks bundled skills.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Sets a site up for a deployment mode (host mode: POSIX users, groups, the helper).
    Site {
        #[command(subcommand)]
        command: site_cmd::SiteCommand,
    },
    /// Serves the agent tools of one person over MCP stdio.
    Mcp {
        #[command(flatten)]
        site: SiteArgs,
        /// The person the tools act for.
        #[arg(long)]
        person: String,
    },
    /// Acts as a person for the gateway (host mode; started by ferry-posix-helper).
    #[command(hide = true)]
    Worker,
    /// Draws the first page of a PDF read on standard input as a PNG on standard output,
    /// confined (started by the gateway for a file preview).
    #[command(name = "preview-render", hide = true)]
    PreviewRender,
    /// Manages circles (groups of persons sharing circles/<circle>/).
    Circle {
        #[command(subcommand)]
        command: site_cmd::CircleCommand,
    },
    /// Runs the archive planner on a local tar or tar.gz.
    Archive {
        #[command(subcommand)]
        command: archive_cmd::ArchiveCommand,
    },
    /// Prints the audit trail of file movements as JSON lines, newest first.
    Audit(audit_cmd::AuditArgs),
    /// Lists, shows and sweeps the media store (the bytes fetched from nodes).
    Media {
        #[command(subcommand)]
        command: media_cmd::MediaCommand,
    },
    /// Lists, approves and revokes the nodes paired with this site.
    Node {
        #[command(subcommand)]
        command: node_cmd::NodeCommand,
    },
    /// Lists, uploads, downloads, deletes and shares a person's files on a running gateway.
    Files {
        #[command(flatten)]
        gateway: files_cmd::GatewayArgs,
        #[command(subcommand)]
        command: files_cmd::FilesCommand,
    },
    /// Starts and directs worker agents and hands them files (a herd); a worker's side too.
    Herd {
        #[command(subcommand)]
        command: herd_cmd::HerdCommand,
    },
}

#[derive(Subcommand)]
enum SkillsCommand {
    /// Checks every DIR/<name>/SKILL.md (or DIR/SKILL.md): front matter and size limits.
    Check { dir: PathBuf },
}

#[derive(Subcommand)]
enum PersonCommand {
    /// Adds a person and prints their token (alone on the last line). In a host-mode
    /// site run as root, also makes their POSIX user and folders; the exit status is 3
    /// when another person had to be left out (the warning names the place).
    Add {
        id: String,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Lists the people of the site.
    List {
        #[command(flatten)]
        site: SiteArgs,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Creates a token and prints it (alone on the last line).
    Create {
        person: String,
        #[arg(long, default_value = "person", value_parser = ["person", "harness", "admin"])]
        kind: String,
        #[command(flatten)]
        site: SiteArgs,
    },
    /// Revokes every token starting with PREFIX (at least 6 characters).
    Revoke {
        prefix: String,
        #[command(flatten)]
        site: SiteArgs,
    },
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// Adds a project to a person's workspace.
    Add {
        person: String,
        id: String,
        #[command(flatten)]
        site: SiteArgs,
    },
}

#[derive(Subcommand)]
enum DocsCommand {
    /// Checks every Markdown document under DIR against the file-delivery rules.
    Check { dir: PathBuf },
}

/// The log filter when `RUST_LOG` is unset: ferry's own events from INFO, libraries'
/// only from WARN (rmcp names MCP session ids at INFO, and a session id is a credential).
const DEFAULT_LOG_FILTER: &str = "warn,ferry=info";

/// A command whose output another program reads (`ferry archive plan … | head`) ends
/// quietly when that program stops reading, as Unix tools do, instead of failing on its
/// next write. The long-running ones keep ignoring SIGPIPE: a peer's socket closing must
/// never end a server, an MCP server or a node.
fn end_quietly_on_a_closed_pipe(command: &Command) {
    let serves = matches!(
        command,
        Command::Serve { .. }
            | Command::Mcp { .. }
            | Command::Worker
            // Writes to a worker's supervisor; and its own output is written with care.
            | Command::Herd { .. }
            | Command::Node {
                command: node_cmd::NodeCommand::Run(_)
            }
    );
    if !serves {
        // SAFETY: setting a signal's disposition to its default touches no memory of ours.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

fn main() -> ExitCode {
    heap_returns_large_buffers();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Makes every buffer of a mebibyte or more go back to the system when it is freed.
///
/// glibc raises its mapping threshold to the size of each mapped buffer that is freed
/// (up to 32 MiB), so after the first large one the next ones of that size are carved
/// from the heap of whichever thread made them, and each of those threads' heaps keeps
/// its high-water mark. A gateway making a chat turn's megabytes of history on its
/// blocking threads grew by 40 to 70 MB over 25 turns that way, against 15 to 25 MB
/// with a fixed threshold. The transfers' own buffers are at most 256 KiB and are
/// unaffected. Called first, before any thread exists.
fn heap_returns_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a glibc tunable; it is called before any other thread
    // runs, and a refusal (0) leaves the default, which is only less frugal.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    // The herd's commands too: a worker's supervisor holds the service's configuration
    // and environment for the worker's whole life, beside the worker's own processes.
    if matches!(
        cli.command,
        Command::Serve { .. } | Command::Mcp { .. } | Command::Herd { .. }
    ) {
        not_dumpable()?;
        raise_open_files_limit();
    }
    end_quietly_on_a_closed_pipe(&cli.command);
    match cli.command {
        Command::Serve {
            site,
            listen,
            print_config,
        } => {
            let mut config = load_config(&site)?;
            if let Some(listen) = listen {
                config.server.listen = listen;
            }
            if print_config {
                print!("{}", config.to_toml_string());
                return Ok(ExitCode::SUCCESS);
            }
            serve(&site.data, config)?;
        }
        Command::Person { command } => match command {
            PersonCommand::Add { id, site } => return site_cmd::add_person(&site, &id),
            PersonCommand::List { site } => {
                for person in open_site(&site)?.persons()? {
                    println!("{person}");
                }
            }
        },
        Command::Token { command } => match command {
            TokenCommand::Create { person, kind, site } => {
                let kind = TokenKind::parse(&kind).context("unknown token kind")?;
                let token = open_site(&site)?.create_token(&person, kind)?;
                println!("{} token for {person}:", kind.as_str());
                println!("{token}");
            }
            TokenCommand::Revoke { prefix, site } => {
                let n = open_site(&site)?.revoke_tokens(&prefix)?;
                println!("revoked {n} token(s)");
            }
        },
        Command::Project { command } => match command {
            ProjectCommand::Add { person, id, site } => {
                let site = open_site(&site)?;
                site.add_project(&person, &id)?;
                println!("added project {id} for {person}");
                // Host mode: the new folders are root's until handed to the person.
                return Ok(site_cmd::exit_status(
                    &site_cmd::reconcile_host_after_change(&site)?,
                ));
            }
        },
        Command::Docs { command } => match command {
            DocsCommand::Check { dir } => return docs_check(&dir),
        },
        Command::Skills { command } => match command {
            SkillsCommand::Check { dir } => return skills_check(&dir),
        },
        Command::Site { command } => return site_cmd::site(command),
        Command::Circle { command } => return site_cmd::circle(command),
        Command::Archive { command } => return archive_cmd::archive(command),
        Command::Media { command } => return media_cmd::media(command),
        Command::Audit(args) => return audit_cmd::audit(args),
        Command::Node { command } => return node_cmd::node(command),
        Command::Herd { command } => return herd_cmd::herd(command),
        Command::Files { gateway, command } => return Ok(files_cmd::files(gateway, command)),
        Command::Mcp { site, person } => return mcp_cmd::mcp(&site, &person),
        Command::Worker => return mcp_cmd::worker(),
        Command::PreviewRender => {
            let status = ferry_preview::render_in_this_process();
            return Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The most open files a serving process asks for: enough for a message's
/// `HERD_FILES_MAX` files held open at once besides its sockets.
const OPEN_FILES_WANTED: u64 = 65_536;

/// Raises the soft limit on open files towards the hard one (at most
/// [`OPEN_FILES_WANTED`]): a herd message holds each of its files open while it is sized,
/// and a soft limit of 1024 is common. A failure leaves the limit as it was.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let want = now
        .maximum
        .map_or(OPEN_FILES_WANTED, |hard| hard.min(OPEN_FILES_WANTED));
    if now.current.is_some_and(|soft| soft < want) {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: now.maximum,
            },
        );
    }
}

/// Says so when `server.max_connections` is past the open-files limit: descriptors would
/// then run out before the connections' bound is reached, and files with them.
fn warn_if_past_open_files(max_connections: usize) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    if let Some(open_files) = limit
        && open_files <= max_connections as u64
    {
        tracing::warn!(
            "server.max_connections ({max_connections}) is not below this process's \
             open-files limit ({open_files}): descriptors run out before connections do; \
             raise the limit (LimitNOFILE=, ulimit -n) or lower the setting"
        );
    }
}

/// Keeps the serving processes' environment and memory (the operator's secrets, other
/// people's tokens) from processes of the same user: in local mode every command runs as
/// that user and could otherwise read `/proc/<pid>/environ` or attach a debugger. The
/// kernel resets the flag when a child execs, so commands are not affected; the price is
/// that these processes leave no core dump.
fn not_dumpable() -> Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .context("making the process non-dumpable (prctl PR_SET_DUMPABLE)")
}

fn load_config(args: &SiteArgs) -> Result<Config> {
    let default_file = args.data.join("ferry.toml");
    let file = match &args.config {
        Some(path) => Some(path.as_path()),
        None if default_file.is_file() => Some(default_file.as_path()),
        None => None,
    };
    Ok(Config::load(file, std::env::vars())?)
}

/// Opens the site an administration command names; never makes one (`ferry serve` and
/// `ferry site init` do), so a mistyped `--data` is an error, not a new empty site.
fn open_site(args: &SiteArgs) -> Result<Site> {
    if !Site::exists(&args.data) {
        bail!(
            "there is no site at {data}: `ferry serve --data {data}` makes one and serves it \
             (`ferry site init --mode local --data {data}` makes one without serving)",
            data = args.data.display()
        );
    }
    let config = load_config(args)?;
    Site::open(&args.data, config)
        .with_context(|| format!("opening the site at {}", args.data.display()))
}

fn serve(data: &Path, config: Config) -> Result<()> {
    match config.site.mode {
        SiteMode::Local => {}
        SiteMode::Container if rustix::process::geteuid().is_root() => {}
        SiteMode::Container => {
            bail!("site.mode = \"container\" hands files to the agent's uid:gid and needs root")
        }
        SiteMode::Host if rustix::process::geteuid().is_root() => bail!(
            "site.mode = \"host\" runs the gateway as the service user `ferry`, never as root \
             (ferry site init --mode host creates it)"
        ),
        SiteMode::Host => tracing::info!(
            "host mode: the member API and the agent tools act as each person, through \
             ferry-posix-helper"
        ),
    }
    let host = config.site.mode == SiteMode::Host;
    // A named API key variable that is not set stops the start, before anything is made.
    config.agent.api_key()?;
    ferry_tools::log_sandbox(&config);
    let listen = config.server.listen.clone();
    let header_timeout = Duration::from_secs(config.server.header_read_timeout_secs);
    let max_connections = config.server.max_connections;
    warn_if_past_open_files(max_connections);
    let grace = Duration::from_secs(config.server.shutdown_grace_secs);
    let created = !Site::exists(data);
    let site = Site::open(data, config)
        .with_context(|| format!("opening the site at {}", data.display()))?;
    let first_token = site.ensure_default_person()?;
    // Refused skills are named once, here; the gateway never loads them.
    let skills = match site.skills() {
        Ok(skills) => skills,
        Err(e) => {
            tracing::warn!("no skill is loaded: {e}");
            Default::default()
        }
    };
    for (dir, why) in &skills.refused {
        tracing::warn!("skill {} is not loaded: {why}", dir.display());
    }
    tracing::info!("{} skill(s) loaded", skills.skills.len());
    // What cannot be used safely is named here; each person is served all the same.
    for finding in site.check()? {
        tracing::warn!("unsafe: {finding}");
    }
    // In host mode the service cannot enter people's folders; `site init` provisions them.
    if !host {
        for person in site.persons()? {
            // One workspace that cannot be provisioned safely is skipped, not the site.
            if let Err(e) = site.provision_person(&person) {
                tracing::warn!("person {person}: workspace not provisioned: {e}");
            }
        }
    }
    let state =
        ferry_gateway::AppState::new(Arc::new(site))?.with_worker(mcp_cmd::worker_program()?);
    let runtime = tokio::runtime::Runtime::new()?;
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let addr = listener.local_addr()?;
        let state = state.with_address(addr);
        state.start_background()?;
        let shown = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_path_buf());
        let how = if created { "created" } else { "opened" };
        let mut lines = match first_token {
            Some(token) => vec![format!("http://{addr}/#token={token}")],
            None => vec![
                format!("http://{addr}/"),
                format!(
                    "(sign in with a person's token: ferry token create <person> --data {})",
                    data.display()
                ),
            ],
        };
        lines.push(format!("{how} the site at {}", shown.display()));
        // Whoever started the gateway may have stopped reading (`ferry serve | head -1`):
        // the gateway goes on serving all the same.
        let mut stdout = std::io::stdout().lock();
        for line in lines {
            let _ = writeln!(stdout, "{line}");
        }
        let _ = stdout.flush();
        drop(stdout);
        let router = ferry_gateway::router(state.clone());
        let stopping = state.clone();
        let shutdown = async move {
            shutdown_signal().await;
            stopping.close_streams();
        };
        let served = ferry_gateway::serve(
            listener,
            router,
            header_timeout,
            max_connections,
            shutdown,
            grace,
        )
        .await;
        state.stopped().await;
        served?;
        Ok(())
    });
    // The grace is over: work still running (an agent's command or wait on a blocking
    // thread, a tool call) is abandoned rather than waited for, which dropping the
    // runtime would do without end.
    runtime.shutdown_timeout(SHUTDOWN_STRAGGLERS);
    served
}

/// How long a stopping gateway waits, after its grace, for blocking work to notice.
const SHUTDOWN_STRAGGLERS: Duration = Duration::from_millis(500);

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}

fn docs_check(dir: &Path) -> Result<ExitCode> {
    let checked = ferry_docs::lint::markdown_files(dir)
        .with_context(|| format!("reading {}", dir.display()))?;
    let violations = ferry_docs::lint::check_dir(dir)?;
    for v in &violations {
        println!("{v}");
    }
    if violations.is_empty() {
        println!("{} document(s) checked, no violations", checked.len());
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{} violation(s) in {} document(s)",
            violations.len(),
            checked.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

fn skills_check(dir: &Path) -> Result<ExitCode> {
    let set = ferry_docs::skills::load_skills(dir)
        .with_context(|| format!("reading {}", dir.display()))?;
    for skill in &set.skills {
        println!("ok      {} ({})", skill.name, skill.dir.display());
    }
    for (dir, why) in &set.refused {
        println!("refused {}: {why}", dir.display());
    }
    if set.skills.is_empty() && set.refused.is_empty() {
        println!(
            "no skills under {} (a skill is a folder with a SKILL.md)",
            dir.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(if set.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
