//! A labelled corpus of AI-agent and CI job failures, for measuring how well
//! a log-template miner groups failure messages into families (one family is
//! one root cause). Test and bench support only, behind the `testing`
//! feature; it uses nothing but `std` and its own seeded generator, so the
//! same seed gives byte-identical output on every platform.
//!
//! # Development and held-out families
//!
//! The families are split by a fixed rule, [`held_out`]: every third family
//! (`family % 3 == 2`) is kept out of development. Tune a miner on the other
//! two thirds only, then score it on all of them: a miner that learned the
//! development families' surface (their commands, their tools) rather than
//! how failure text is shaped does worse on the held-out third.
//!
//! # Fresh families
//!
//! A third split, [`fresh`]: ten families appended after the others (so no
//! family number moved), written before the miner was tuned again and never
//! looked at while tuning, not even their misses. [`agent_failures`] does
//! not draw them, so its output is what it was; [`fresh_failures`] draws
//! only them.
//!
//! # Second fresh set
//!
//! A fourth split, [`fresh2`]: sixteen families appended after the fresh
//! ones, written by someone who had never seen the miner's rules (only this
//! file's generators, to avoid repeating their families), then frozen
//! before the miner was run on them. The corpus style itself may have
//! shaped the miner; this set is the check. They cover shapes the others
//! lack (Kubernetes pod descriptions, Go panics inside `go test`, Gradle,
//! Kotlin `Caused by:` chains, psycopg's DETAIL lines, LLM SDK errors with
//! their JSON bodies, Terraform's boxes in colour) and five more near-miss
//! pairs. Neither [`agent_failures`] nor [`fresh_failures`] draws them;
//! [`fresh2_failures`] draws only them.
//!
//! # Third fresh set
//!
//! A fifth split, [`fresh3`]: twenty families appended after the second
//! set, written by yet another hand that had not seen the miner's rules
//! (only this file's family list, its shared helpers and the second set's
//! plumbing, to avoid repeating a family), in its own style, from what
//! the tools themselves print; frozen before the miner was first run on
//! them. They cover ecosystems the other sets lack: RSpec, Laravel with
//! MySQL, `dotnet test`, Playwright, Helm, pre-commit (ruff, black), CMake
//! with gcc and clang, xcodebuild, a Kafka consumer's logs, Flyway, and
//! agents (OpenAI's 429s in Python, Go and Node logs, an edit tool whose
//! target text is gone, a validator's score below its threshold). Output
//! comes framed by one of several CI runners (GitHub Actions' raw log
//! stamps every line), and seven near-miss pairs share a command, a
//! runner or a statement. No other function draws them;
//! [`fresh3_failures`] draws only them.
//!
//! # What makes it hard
//!
//! - Many families share their first line: the job runner wraps most
//!   failures as ``Command `…` failed: process exited with exit code N``, so
//!   the headline says little and the command is itself a variable.
//! - Variables are not only numbers: test names, branch names, package and
//!   crate names, field names, hosts, commands and file paths vary inside a
//!   family, so masking digits is not enough.
//! - The lines after the headline vary a lot: test runner output, compiler
//!   notes, progress lines and application logs, from none to dozens of
//!   lines, some with ANSI colour codes, some with CRLF line endings, a few
//!   with a line several kilobytes long (minified JSON).
//! - Near misses are different families: `npm test` against `npm install`
//!   failures; the same Rust panic message at two call sites; HTTP 502
//!   against 503 from the same hosts; exit code 1 against exit code 2 of the
//!   same script; `KeyError` raised in two functions; connection refused
//!   against connection reset by peer at one call site; ESLint against tsc;
//!   `git push` rejected against a `git pull` conflict; and a few more (see
//!   the table in the source).
//! - Inside a family the crash site (file and function of the top
//!   application frame, and its line) is fixed, as in real life; library and
//!   runtime frames, callers, versions and ids vary.
//! - Family sizes are skewed (Zipf, exponent 1.1): at n = 20,000 a few
//!   families have thousands of items and many have a few dozen.

/// One labelled failure: what an agent's failed attempt recorded.
#[derive(Clone, Debug)]
pub struct Labelled {
    /// The true family (stable number, 0..family_count()).
    pub family: u32,
    /// The error type as a job runner records it, e.g. "CommandFailed",
    /// "Timeout", "MergeConflict", "AgentError", "ValidationFailed",
    /// "ResourceExhausted", "PermissionDenied", "NetworkError" (None for some
    /// families).
    pub error_type: Option<String>,
    /// The error message: often multi-line (a headline plus command output).
    pub message: String,
    /// A separate stack trace for families that have one (Python, Rust,
    /// Java, Go, Node and PHP traces), else None.
    pub stack_trace: Option<String>,
}

/// How many true families [`agent_failures`] draws from: the development
/// and held-out families. The [`fresh`] families come after them, then the
/// [`fresh2`] ones, then the [`fresh3`] ones.
pub fn family_count() -> u32 {
    FRESH_FROM as u32
}

/// The first fresh family: the families from here on were added after the
/// others, before the miner was tuned again, and are drawn only by
/// [`fresh_failures`].
const FRESH_FROM: usize = 72;

/// How many fresh families there are (the first fresh set only).
pub fn fresh_family_count() -> u32 {
    (FRESH2_FROM - FRESH_FROM) as u32
}

/// The first family of the second fresh set: the families from here to
/// [`FRESH3_FROM`] were written by someone who had not seen the miner's
/// rules, and are drawn only by [`fresh2_failures`].
const FRESH2_FROM: usize = 82;

/// How many families the second fresh set has.
pub fn fresh2_family_count() -> u32 {
    (FRESH3_FROM - FRESH2_FROM) as u32
}

/// The first family of the third fresh set: the families from here to the
/// end were written by another hand that had not seen the miner's rules,
/// and are drawn only by [`fresh3_failures`].
const FRESH3_FROM: usize = 98;

/// How many families the third fresh set has.
pub fn fresh3_family_count() -> u32 {
    (FAMILIES.len() - FRESH3_FROM) as u32
}

/// A short stable name for a family (e.g. `"npm-test"`), for reports that
/// show which families a miner split or merged.
///
/// # Panics
///
/// If `family >= family_count() + fresh_family_count() +
/// fresh2_family_count() + fresh3_family_count()`.
pub fn family_name(family: u32) -> &'static str {
    FAMILIES[family as usize].name
}

/// True for the families kept out of development: every third one.
pub fn held_out(family: u32) -> bool {
    family % 3 == 2 && !fresh(family) && !fresh2(family) && !fresh3(family)
}

/// True for the fresh families: a third split, written before the miner was
/// tuned on this corpus again and never looked at while tuning (neither
/// their misses nor how they are keyed), so their score is the one measure
/// of data no rule was written for.
pub fn fresh(family: u32) -> bool {
    (FRESH_FROM..FRESH2_FROM).contains(&(family as usize))
}

/// True for the second fresh set: families written blind to the miner's
/// rules by someone else than its author, so that a style the miner was
/// tuned to without meaning to does not flatter its score.
pub fn fresh2(family: u32) -> bool {
    (FRESH2_FROM..FRESH3_FROM).contains(&(family as usize))
}

/// True for the third fresh set: families written blind to the miner's
/// rules by a third hand, in a style of its own, to measure how the miner
/// generalises to failures it was never shaped by. Their misses are never
/// listed.
pub fn fresh3(family: u32) -> bool {
    family as usize >= FRESH3_FROM
}

/// True for the half of the second fresh set kept blind after its first
/// measurement (2026-11-28: GA 0.2713 for all 16): its misses are never
/// listed, so it stays a measure of failures no rule was written for. The
/// other half (the families for which this is false) was looked at to
/// find what the miner does wrong in general. Near-miss pairs stay
/// together in one half.
pub fn fresh2_blind(family: u32) -> bool {
    fresh2(family) && [85, 87, 88, 91, 93, 94, 95].contains(&family)
}

/// True for the half of the third fresh set kept blind after its first
/// measurement (2026-11-28: GA 0.1457 for all 20, 136 groups): as for
/// [`fresh2_blind`], its misses are never listed, and the other half was
/// looked at. Near-miss pairs stay together in one half.
pub fn fresh3_blind(family: u32) -> bool {
    fresh3(family) && [98, 101, 102, 105, 106, 111, 112, 113, 115, 117].contains(&family)
}

/// True for a family of either blind half ([`fresh2_blind`],
/// [`fresh3_blind`]).
pub fn blind(family: u32) -> bool {
    fresh2_blind(family) || fresh3_blind(family)
}

/// `n` failures drawn with skewed (Zipf, exponent 1.1) family sizes,
/// deterministic for `seed`. The sizes depend on `n` only; `seed` decides
/// the order and every variable. Each family gets at least `n / 2000` items:
/// at n >= 10,000 every family appears at least five times.
pub fn agent_failures(seed: u64, n: usize) -> Vec<Labelled> {
    draw(seed, 0, family_sizes(n))
}

/// `n` failures of the [`fresh`] families only, drawn the same way as
/// [`agent_failures`] (Zipf sizes over their own fixed ranking).
pub fn fresh_failures(seed: u64, n: usize) -> Vec<Labelled> {
    draw(seed, FRESH_FROM, sizes_of(FRESH_FROM..FRESH2_FROM, n))
}

/// `n` failures of the [`fresh2`] families only, drawn the same way (Zipf
/// sizes over their own fixed ranking).
pub fn fresh2_failures(seed: u64, n: usize) -> Vec<Labelled> {
    draw(seed, FRESH2_FROM, sizes_of(FRESH2_FROM..FRESH3_FROM, n))
}

/// `n` failures of the [`fresh3`] families only, drawn the same way (Zipf
/// sizes over their own fixed ranking).
pub fn fresh3_failures(seed: u64, n: usize) -> Vec<Labelled> {
    draw(seed, FRESH3_FROM, sizes_of(FRESH3_FROM..FAMILIES.len(), n))
}

/// `sizes[i]` failures of family `first + i` each, shuffled.
fn draw(seed: u64, first: usize, sizes: Vec<usize>) -> Vec<Labelled> {
    let mut order: Vec<u32> = sizes
        .into_iter()
        .enumerate()
        .flat_map(|(i, count)| std::iter::repeat_n((first + i) as u32, count))
        .collect();
    let mut g = Gen::new(seed);
    g.shuffle(&mut order);
    order.into_iter().map(|family| g.failure(family)).collect()
}

// ---------------------------------------------------------------------------
// Family sizes

/// How many items each family gets out of `n`: a floor of `n / 2000` each,
/// the rest split in proportion to Zipf weights over a fixed ranking, with
/// the largest remainders rounded up so the counts add up to `n` exactly.
fn family_sizes(n: usize) -> Vec<usize> {
    sizes_of(0..FRESH_FROM, n)
}

/// [`family_sizes`] for the families in `range` (index `i` of the result is
/// family `range.start + i`).
fn sizes_of(range: std::ops::Range<usize>, n: usize) -> Vec<usize> {
    let families = range.len();
    let floor = n / 2000;
    let rest = (n - floor * families) as u128;
    let weights: Vec<u128> = range
        .clone()
        .map(|f| zipf_weight(rank(f, &range)))
        .collect();
    let total: u128 = weights.iter().sum();
    let mut sizes: Vec<usize> = weights
        .iter()
        .map(|w| floor + (rest * w / total) as usize)
        .collect();
    // Integer arithmetic from here on, so no rounding can differ between
    // platforms; ties go to the lower family number.
    let mut by_remainder: Vec<usize> = (0..families).collect();
    by_remainder.sort_by_key(|&f| (std::cmp::Reverse(rest * weights[f] % total), f));
    let short = n - sizes.iter().sum::<usize>();
    for &f in by_remainder.iter().take(short) {
        sizes[f] += 1;
    }
    sizes
}

/// The commonest failures, largest first (test and type-check failures,
/// timeouts, the API's overload errors, a crash or two), so that the big
/// families are the ones with the most variable text, as in real queues.
/// Both the development and the held-out half get some of them.
const LARGEST: &[&str] = &[
    "pytest-failed",
    "cargo-test-assert",
    "npm-test",
    "llm-overloaded",
    "command-timeout",
    "rustc-e0308",
    "git-pull-conflict",
    "agent-timeout",
    "py-keyerror-orders",
    "tsc-ts2322",
    "go-test-fail",
    "eslint",
    "rust-unwrap-none-worker",
    "http-502",
];

/// The family's place in the size ranking of the families in `range` (0 =
/// largest): [`LARGEST`] first, then the others in a fixed shuffled order,
/// so that sizes do not follow the table's order.
fn rank(family: usize, range: &std::ops::Range<usize>) -> usize {
    let name = FAMILIES[family].name;
    if let Some(rank) = LARGEST.iter().position(|&n| n == name) {
        return rank;
    }
    let key = |f: usize| splitmix(0xC0_4905 ^ f as u64);
    let mine = key(family);
    let before = range
        .clone()
        .filter(|&f| !LARGEST.contains(&FAMILIES[f].name) && key(f) < mine)
        .count();
    let largest = range
        .clone()
        .filter(|&f| LARGEST.contains(&FAMILIES[f].name))
        .count();
    largest + before
}

/// `1e12 / (rank + 1)^1.1` as an integer. `powf` is not correctly rounded
/// and may differ in the last bit between platforms, so the tenth root is
/// taken by Newton's method, which uses only exactly rounded operations.
fn zipf_weight(rank: usize) -> u128 {
    let k = (rank + 1) as f64;
    let mut root = k;
    for _ in 0..200 {
        let ninth = (0..9).fold(1.0, |acc, _| acc * root);
        root = (9.0 * root + k / ninth) / 10.0;
    }
    (1e12 / (k * root)) as u128
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------------------
// The families

/// A family: its name, the error type the runner records, and how to write
/// one occurrence.
struct Family {
    name: &'static str,
    error_type: Option<&'static str>,
    make: fn(&mut Gen) -> Out,
}

const COMMAND_FAILED: Option<&str> = Some("CommandFailed");
const TIMEOUT: Option<&str> = Some("Timeout");
const MERGE_CONFLICT: Option<&str> = Some("MergeConflict");
const AGENT_ERROR: Option<&str> = Some("AgentError");
const VALIDATION_FAILED: Option<&str> = Some("ValidationFailed");
const RESOURCE_EXHAUSTED: Option<&str> = Some("ResourceExhausted");
const PERMISSION_DENIED: Option<&str> = Some("PermissionDenied");
const NETWORK_ERROR: Option<&str> = Some("NetworkError");

const fn family(
    name: &'static str,
    error_type: Option<&'static str>,
    make: fn(&mut Gen) -> Out,
) -> Family {
    Family {
        name,
        error_type,
        make,
    }
}

/// The families, in family-number order. Near misses (different families
/// whose text is close) are marked; the parameterised ones share one
/// generator and differ only in the parameter.
const FAMILIES: &[Family] = &[
    // JavaScript and TypeScript
    family("npm-test", COMMAND_FAILED, npm_test), // near miss: npm-install-404
    family("npm-install-404", COMMAND_FAILED, npm_install_404),
    family("npm-install-eresolve", COMMAND_FAILED, npm_install_eresolve),
    family("npm-ci-lockfile", COMMAND_FAILED, npm_ci_lockfile),
    // near miss: the same TypeError at two call sites
    family("node-undefined-render", COMMAND_FAILED, |g| {
        node_undefined(g, &NODE_RENDER)
    }),
    family("node-undefined-orders", COMMAND_FAILED, |g| {
        node_undefined(g, &NODE_ORDERS)
    }),
    family("node-econnrefused", COMMAND_FAILED, node_econnrefused),
    family("tsc-ts2322", COMMAND_FAILED, tsc_ts2322), // near miss: eslint
    family("tsc-ts2307", COMMAND_FAILED, tsc_ts2307),
    family("eslint", COMMAND_FAILED, eslint),
    family("vite-unresolved-import", COMMAND_FAILED, vite_unresolved),
    // Rust
    family("rustc-e0308", COMMAND_FAILED, rustc_e0308),
    family("rustc-e0425", COMMAND_FAILED, rustc_e0425),
    family("rustc-e0502", COMMAND_FAILED, rustc_e0502),
    family("cargo-test-assert", COMMAND_FAILED, cargo_test_assert),
    // near miss: one panic message, two call sites
    family("rust-unwrap-none-worker", COMMAND_FAILED, |g| {
        rust_panic(g, &UNWRAP_WORKER)
    }),
    family("rust-unwrap-none-config", COMMAND_FAILED, |g| {
        rust_panic(g, &UNWRAP_CONFIG)
    }),
    family("rust-index-oob", COMMAND_FAILED, |g| {
        rust_panic(g, &INDEX_TOKENS)
    }),
    family("rust-unwrap-err-serde", COMMAND_FAILED, |g| {
        rust_panic(g, &SERDE_MANIFEST)
    }),
    family("cargo-version-select", COMMAND_FAILED, cargo_version_select),
    family("clippy-denied", COMMAND_FAILED, clippy_denied),
    family("rustfmt-check", COMMAND_FAILED, rustfmt_check),
    // Python
    family("pytest-failed", COMMAND_FAILED, pytest_failed),
    family("pytest-collection-error", COMMAND_FAILED, pytest_collection),
    // near miss: KeyError in two functions
    family("py-keyerror-orders", COMMAND_FAILED, |g| {
        py_key_error(g, &KEYERROR_ORDERS)
    }),
    family("py-keyerror-config", COMMAND_FAILED, |g| {
        py_key_error(g, &KEYERROR_CONFIG)
    }),
    family("py-typeerror-nonetype", COMMAND_FAILED, py_type_error),
    // near miss: refused against reset, at the same call site
    family("py-conn-refused", NETWORK_ERROR, |g| {
        py_connection(g, false)
    }),
    family("py-conn-reset", NETWORK_ERROR, |g| py_connection(g, true)),
    family("py-module-not-found", COMMAND_FAILED, py_module_not_found),
    family("mypy", COMMAND_FAILED, mypy),
    family("pip-no-distribution", COMMAND_FAILED, pip_no_distribution),
    // Go
    family("go-test-fail", COMMAND_FAILED, go_test_fail),
    family("go-build-undefined", COMMAND_FAILED, go_build_undefined),
    family("go-nil-pointer", COMMAND_FAILED, go_nil_pointer),
    family("go-missing-sum", COMMAND_FAILED, go_missing_sum),
    // Java
    family("java-npe", COMMAND_FAILED, java_npe),
    family("java-context-db-refused", COMMAND_FAILED, java_context),
    family("maven-surefire", COMMAND_FAILED, maven_surefire),
    // git; near miss: git-push-non-ff against git-pull-conflict, and the two
    // push rejections against each other
    family("git-pull-conflict", MERGE_CONFLICT, git_pull_conflict),
    family("git-push-non-ff", COMMAND_FAILED, git_push_non_ff),
    family("git-push-protected", COMMAND_FAILED, git_push_protected),
    family("git-worktree-in-use", Some("WorktreeError"), git_worktree),
    // HTTP; near miss: 502 against 503 from the same hosts
    family("http-429-rate-limit", NETWORK_ERROR, http_rate_limit),
    family("http-502", NETWORK_ERROR, |g| http_gateway(g, 502)),
    family("http-503", NETWORK_ERROR, |g| http_gateway(g, 503)),
    family("http-401", PERMISSION_DENIED, http_unauthorized),
    // LLM and agent; near miss: overloaded against api_error
    family("llm-context-length", AGENT_ERROR, llm_context_length),
    family("llm-overloaded", AGENT_ERROR, |g| llm_api_error(g, true)),
    family("llm-internal-error", AGENT_ERROR, |g| {
        llm_api_error(g, false)
    }),
    family("llm-invalid-tool-json", AGENT_ERROR, llm_invalid_tool_json),
    family("agent-max-turns", AGENT_ERROR, agent_max_turns),
    // Timeouts
    family("command-timeout", TIMEOUT, command_timeout),
    family("agent-timeout", TIMEOUT, agent_timeout),
    // Resources; near miss: killed by the OOM killer against V8's heap limit
    family("oom-killed", RESOURCE_EXHAUSTED, oom_killed),
    family("node-heap-oom", RESOURCE_EXHAUSTED, node_heap_oom),
    family("disk-full", RESOURCE_EXHAUSTED, disk_full),
    // Permissions
    family("permission-denied-path", PERMISSION_DENIED, permission_path),
    family("docker-socket-denied", PERMISSION_DENIED, docker_socket),
    // Network
    family("dns-failure", NETWORK_ERROR, dns_failure),
    family("tls-cert-expired", NETWORK_ERROR, tls_expired),
    family("tcp-dial-timeout", NETWORK_ERROR, dial_timeout),
    // Docker
    family("docker-build-step", COMMAND_FAILED, docker_build_step),
    family("docker-manifest-unknown", COMMAND_FAILED, docker_manifest),
    // Configuration and validation
    family("missing-env-var", None, missing_env_var),
    family("json-parse-error", None, json_parse_error),
    family("validation-fields", VALIDATION_FAILED, validation_fields),
    family("no-commits", Some("CommitValidationFailed"), no_commits),
    // near miss: the same script, exit code 1 against exit code 2
    family("script-exit-1", COMMAND_FAILED, |g| script_exit(g, 1)),
    family("script-exit-2", COMMAND_FAILED, |g| script_exit(g, 2)),
    // Databases
    family("postgres-unique-violation", None, postgres_unique),
    family("sqlite-locked", None, sqlite_locked),
    // Fresh (72 onwards, see `fresh`): added before the miner was tuned
    // again, and never looked at while tuning.
    family(
        "pip-resolution-impossible",
        COMMAND_FAILED,
        pip_resolution_impossible,
    ),
    family("kubectl-rollout-deadline", COMMAND_FAILED, kubectl_rollout),
    family(
        "terraform-undeclared-variable",
        COMMAND_FAILED,
        terraform_undeclared,
    ),
    family("jvm-heap-oom", COMMAND_FAILED, jvm_heap_oom),
    family("native-segfault", COMMAND_FAILED, native_segfault),
    // near miss: npm-test (one command, a timeout instead of an assertion)
    family("jest-test-timeout", COMMAND_FAILED, jest_test_timeout),
    // near miss: go-test-fail (one command, a race instead of a failed check)
    family("go-data-race", COMMAND_FAILED, go_data_race),
    family("prisma-migration-failed", COMMAND_FAILED, prisma_migration),
    family("s3-access-denied", PERMISSION_DENIED, s3_access_denied),
    family("node-eaddrinuse", COMMAND_FAILED, node_eaddrinuse),
    // Second fresh set (82 onwards, see `fresh2`): written blind to the
    // miner's rules, frozen before the miner was run on them.
    // near miss: OOMKilled (137) against a liveness-probe kill (143), one
    // workload, one pod description
    family("k8s-crashloop-oomkilled", COMMAND_FAILED, |g| {
        k8s_crashloop(g, true)
    }),
    family("k8s-crashloop-liveness", COMMAND_FAILED, |g| {
        k8s_crashloop(g, false)
    }),
    family("go-test-panic-index", COMMAND_FAILED, go_test_panic_index),
    family(
        "gradle-cannot-find-symbol",
        COMMAND_FAILED,
        gradle_cannot_find_symbol,
    ),
    family("kotlin-feed-null-sku", None, kotlin_feed_null),
    // near miss: a deadlock against a unique violation, one function
    family("pg-ledger-deadlock", COMMAND_FAILED, |g| pg_ledger(g, true)),
    family("pg-ledger-duplicate-key", COMMAND_FAILED, |g| {
        pg_ledger(g, false)
    }),
    // near miss: 429 against 529 from one API at one call site
    family("anthropic-rate-limit", AGENT_ERROR, |g| {
        anthropic_sdk(g, false)
    }),
    family("anthropic-overloaded", AGENT_ERROR, |g| {
        anthropic_sdk(g, true)
    }),
    family(
        "openai-context-length",
        COMMAND_FAILED,
        openai_context_length,
    ),
    family("git-https-auth-failed", PERMISSION_DENIED, git_auth_failed),
    family(
        "terraform-bucket-already-exists",
        COMMAND_FAILED,
        terraform_bucket_exists,
    ),
    // near miss: an unknown issuer against an expired certificate, one
    // index
    family("pip-tls-unknown-issuer", COMMAND_FAILED, |g| {
        pip_tls(g, false)
    }),
    family("pip-tls-cert-expired", COMMAND_FAILED, |g| pip_tls(g, true)),
    // near miss: ImportError against ModuleNotFoundError, one app's imports
    family("flask-werkzeug-url-quote", COMMAND_FAILED, |g| {
        flask_import(g, false)
    }),
    family("flask-limiter-missing", COMMAND_FAILED, |g| {
        flask_import(g, true)
    }),
    // Third fresh set (98 onwards, see `fresh3`): written blind to the
    // miner's rules by another hand, frozen before the miner was run on
    // them.
    family("rspec-expectation-failed", COMMAND_FAILED, rspec_failed),
    // near miss: one insert into `orders` from one queue job, a duplicate
    // key (MySQL 1062) against a missing parent row (1452), both SQLSTATE
    // 23000
    family("laravel-orders-duplicate-entry", None, |g| {
        laravel_orders_insert(g, true)
    }),
    family("laravel-orders-foreign-key", None, |g| {
        laravel_orders_insert(g, false)
    }),
    // near miss: the same NullReferenceException in `dotnet test`, thrown
    // at two call sites
    family("dotnet-nre-discount-apply", COMMAND_FAILED, |g| {
        dotnet_nre(g, &NRE_DISCOUNT)
    }),
    family("dotnet-nre-invoice-render", COMMAND_FAILED, |g| {
        dotnet_nre(g, &NRE_INVOICE)
    }),
    // near miss: one Playwright suite, a failed expect (which itself says
    // "Timed out 5000ms" in older versions) against a test timeout
    family("playwright-expect-cart-total", COMMAND_FAILED, |g| {
        playwright(g, false)
    }),
    family("playwright-timeout-place-order", COMMAND_FAILED, |g| {
        playwright(g, true)
    }),
    // near miss: OpenAI's two 429s (RateLimitError both), a rate limit
    // against an exhausted quota, in one agent's logs
    family("openai-rate-limit", AGENT_ERROR, |g| openai_429(g, false)),
    family("openai-insufficient-quota", AGENT_ERROR, |g| {
        openai_429(g, true)
    }),
    // near miss: `helm upgrade --wait`, refused because another operation
    // is in progress against timed out waiting
    family("helm-upgrade-in-progress", COMMAND_FAILED, |g| {
        helm_upgrade(g, false)
    }),
    family("helm-upgrade-timeout", COMMAND_FAILED, |g| {
        helm_upgrade(g, true)
    }),
    // near miss: one pre-commit run on one file, ruff's findings against
    // black's reformatting
    family("precommit-ruff", COMMAND_FAILED, |g| pre_commit(g, false)),
    family("precommit-black", COMMAND_FAILED, |g| pre_commit(g, true)),
    // near miss: one CMake build, a compile error against an undefined
    // reference at link time
    family("cmake-compile-no-member", COMMAND_FAILED, |g| {
        cmake_build(g, false)
    }),
    family("cmake-undefined-reference", COMMAND_FAILED, |g| {
        cmake_build(g, true)
    }),
    family("xcodebuild-xctassert", COMMAND_FAILED, xcodebuild_test),
    family("kafka-commit-failed", None, kafka_commit_failed),
    family("flyway-checksum-mismatch", COMMAND_FAILED, flyway_checksum),
    family("agent-edit-not-found", AGENT_ERROR, agent_edit_not_found),
    family(
        "agent-validation-score",
        VALIDATION_FAILED,
        agent_validation_score,
    ),
];

/// What a generator writes: the message and, for some, a stack trace.
struct Out {
    message: String,
    stack_trace: Option<String>,
}

impl Out {
    fn plain(message: Text) -> Self {
        Out {
            message: message.finish(),
            stack_trace: None,
        }
    }

    fn traced(message: Text, trace: Text) -> Self {
        Out {
            message: message.finish(),
            stack_trace: Some(trace.finish()),
        }
    }
}

/// Lines joined with `\n`, so the generators read like the output they
/// imitate.
#[derive(Default)]
struct Text(String);

impl Text {
    fn line(&mut self, line: impl AsRef<str>) {
        self.0.push_str(line.as_ref());
        self.0.push('\n');
    }

    fn finish(mut self) -> String {
        while self.0.ends_with('\n') {
            self.0.pop();
        }
        self.0
    }
}

/// The job runner's headline for a failed command, shared by most families.
fn command_failed(command: &str, code: i32) -> String {
    format!("Command `{command}` failed: process exited with exit code {code}")
}

// ---------------------------------------------------------------------------
// Vocabulary: the word-valued variables

const VERBS: &[&str] = &[
    "create", "update", "delete", "fetch", "parse", "render", "load", "save", "validate", "sync",
    "merge", "retry", "claim", "export", "import", "resolve", "refresh", "archive", "schedule",
    "notify",
];
const NOUNS: &[&str] = &[
    "user",
    "order",
    "invoice",
    "session",
    "token",
    "config",
    "queue",
    "item",
    "job",
    "header",
    "payload",
    "profile",
    "cart",
    "report",
    "webhook",
    "schema",
    "migration",
    "branch",
    "worktree",
    "account",
    "message",
    "snapshot",
];
const FIELDS: &[&str] = &[
    "email",
    "user_id",
    "customer_id",
    "created_at",
    "status",
    "priority",
    "currency",
    "amount",
    "webhook_url",
    "timeout_ms",
    "region",
    "tenant_id",
    "sku",
    "quantity",
    "display_name",
];
const NPM_PACKAGES: &[&str] = &[
    "left-pad",
    "lodash",
    "react",
    "react-dom",
    "@types/node",
    "@types/react",
    "express",
    "axios",
    "typescript",
    "eslint",
    "jest",
    "vite",
    "webpack",
    "@babel/core",
    "chalk",
    "commander",
    "zod",
    "prisma",
    "@tanstack/react-query",
    "next",
    "dotenv",
    "uuid",
    "date-fns",
    "rxjs",
    "@acme/ui-kit",
    "@acme/shared",
];
const JS_APPS: &[&str] = &[
    "web-app",
    "dashboard",
    "api-gateway",
    "admin-ui",
    "docs-site",
];
const JS_DIRS: &[&str] = &[
    "components",
    "pages",
    "hooks",
    "api",
    "utils",
    "store",
    "lib",
];
const TS_TYPES: &[&str] = &[
    "string",
    "number",
    "boolean",
    "undefined",
    "null",
    "User",
    "Order",
    "Promise<void>",
    "string[]",
    "Record<string, unknown>",
];
/// Crates and the minor version line they are on (the patch varies).
const CRATES: &[(&str, &str)] = &[
    ("serde", "1.0"),
    ("serde_json", "1.0"),
    ("tokio", "1.4"),
    ("anyhow", "1.0"),
    ("thiserror", "2.0"),
    ("clap", "4.5"),
    ("rusqlite", "0.3"),
    ("reqwest", "0.12"),
    ("hyper", "1.5"),
    ("tracing", "0.1"),
    ("regex", "1.11"),
    ("rand", "0.8"),
    ("chrono", "0.4"),
    ("axum", "0.8"),
    ("futures", "0.3"),
    ("bytes", "1.9"),
    ("itertools", "0.13"),
    ("once_cell", "1.20"),
];
const WORKSPACE_CRATES: &[&str] = &[
    "dlq-core",
    "dlq-worker",
    "api-server",
    "agent-runner",
    "queue-store",
    "config-loader",
];
const RUST_MODULES: &[&str] = &[
    "store",
    "queue",
    "worker",
    "config",
    "retry",
    "export",
    "import",
    "model/item",
    "db/pool",
    "api/handlers",
    "cli/args",
];
const PY_MODULES: &[&str] = &[
    "requests",
    "yaml",
    "numpy",
    "pandas",
    "pydantic",
    "httpx",
    "sqlalchemy",
    "boto3",
    "redis",
    "celery",
    "jinja2",
    "attrs",
    "requests_mock",
    "freezegun",
    "pytest_asyncio",
    "orjson",
];
const GO_PACKAGES: &[&str] = &[
    "internal/api",
    "internal/store",
    "internal/config",
    "internal/queue",
    "pkg/auth",
    "pkg/retry",
    "pkg/webhook",
];
const REPOS: &[&str] = &[
    "acme/web-app",
    "acme/api-server",
    "acme/dlq",
    "acme/infra",
    "acme/mobile",
    "acme/billing",
];
const BASE_BRANCHES: &[&str] = &["main", "master", "develop"];
const QUEUES: &[&str] = &[
    "default",
    "mapreduce",
    "webhooks",
    "exports",
    "priority",
    "retry",
];
const ENV_VARS: &[&str] = &[
    "DATABASE_URL",
    "REDIS_URL",
    "GITHUB_TOKEN",
    "ANTHROPIC_API_KEY",
    "AWS_REGION",
    "STRIPE_SECRET_KEY",
    "SENTRY_DSN",
    "JWT_SECRET",
    "S3_BUCKET",
];
/// Commands an agent runs, for the families where the command is a variable.
const COMMANDS: &[&str] = &[
    "cargo test --workspace",
    "cargo build --release",
    "cargo clippy --all-targets -- -D warnings",
    "npm test",
    "npm run build",
    "npm run test:e2e",
    "pytest -q",
    "pytest tests/integration",
    "go test ./...",
    "make check",
    "./gradlew test",
    "docker build -t app .",
];

// ---------------------------------------------------------------------------
// The generator: a seeded random source plus the helpers every family uses

struct Gen {
    state: u64,
    /// Whether this message's tools wrote ANSI colours (decided per message).
    color: bool,
    /// This message's clock, in milliseconds since the Unix epoch: each
    /// message starts at a random moment in late 2025 and its timestamps move
    /// forward from there, as log lines do.
    clock: u64,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Gen {
            state: splitmix(seed),
            color: false,
            clock: SEPTEMBER_2025,
        }
    }

    /// splitmix64: tiny, fast, and the same on every platform.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.state)
    }

    /// A number in `0..n` (multiply-shift rather than `%`, to avoid bias).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A number in `lo..=hi`.
    fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + ((u128::from(self.next_u64()) * u128::from(hi - lo + 1)) >> 64) as u64
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// Two different items.
    fn pick_two<T: Copy>(&mut self, items: &[T]) -> (T, T) {
        let a = self.below(items.len());
        let b = (a + 1 + self.below(items.len() - 1)) % items.len();
        (items[a], items[b])
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }

    fn uuid(&mut self) -> String {
        let variant = self.pick(&["8", "9", "a", "b"]);
        format!(
            "{}-{}-4{}-{variant}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }

    fn private_ip(&mut self) -> String {
        match self.below(3) {
            0 => format!(
                "10.{}.{}.{}",
                self.int(0, 255),
                self.int(0, 255),
                self.int(1, 254)
            ),
            1 => format!(
                "172.{}.{}.{}",
                self.int(16, 31),
                self.int(0, 255),
                self.int(1, 254)
            ),
            _ => format!("192.168.{}.{}", self.int(0, 255), self.int(1, 254)),
        }
    }

    /// An RFC 3339 timestamp a little after the previous one.
    fn timestamp(&mut self) -> String {
        self.clock += self.int(1, 4000);
        rfc3339(self.clock)
    }

    /// The timestamp as `20251114_222507`, as in agent branch names.
    fn compact_time(&mut self) -> String {
        let ts = self.timestamp();
        format!(
            "{}{}{}_{}{}{}",
            &ts[0..4],
            &ts[5..7],
            &ts[8..10],
            &ts[11..13],
            &ts[14..16],
            &ts[17..19]
        )
    }

    /// Seconds with two decimals, e.g. `2.31`.
    fn seconds(&mut self, max: u64) -> String {
        format!("{}.{:02}", self.int(0, max), self.int(0, 99))
    }

    fn version(&mut self) -> String {
        format!("{}.{}.{}", self.int(0, 4), self.int(0, 30), self.int(0, 20))
    }

    /// `verb_noun`, e.g. `claim_item`.
    fn snake(&mut self) -> String {
        format!("{}_{}", self.pick(VERBS), self.pick(NOUNS))
    }

    /// `VerbNoun`, e.g. `ClaimItem`.
    fn pascal(&mut self) -> String {
        format!(
            "{}{}",
            capitalise(self.pick(VERBS)),
            capitalise(self.pick(NOUNS))
        )
    }

    /// `verbNoun`, e.g. `claimItem`.
    fn camel(&mut self) -> String {
        format!("{}{}", self.pick(VERBS), capitalise(self.pick(NOUNS)))
    }

    fn branch(&mut self) -> String {
        match self.below(4) {
            0 => format!("feature/{}-{}", self.pick(VERBS), self.pick(NOUNS)),
            1 => format!("fix/{}-{}", self.pick(NOUNS), self.pick(VERBS)),
            2 => format!(
                "prodigy-agent-{}-item_{}",
                self.compact_time(),
                self.int(1, 999)
            ),
            _ => format!("agent/{}-{}", self.pick(NOUNS), self.hex(6)),
        }
    }

    fn session(&mut self) -> String {
        format!("session-{}", self.hex(8))
    }

    /// `text` in an ANSI colour when this message's tools write colour.
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Draws one occurrence of `family`.
    fn failure(&mut self, family: u32) -> Labelled {
        let spec = &FAMILIES[family as usize];
        self.color = self.chance(12);
        self.clock = SEPTEMBER_2025 + self.int(0, 120 * 86_400_000);
        let Out {
            mut message,
            mut stack_trace,
        } = (spec.make)(self);
        // Jobs on Windows runners record CRLF line endings.
        if self.chance(3) {
            message = message.replace('\n', "\r\n");
            stack_trace = stack_trace.map(|trace| trace.replace('\n', "\r\n"));
        }
        Labelled {
            family,
            error_type: spec.error_type.map(String::from),
            message,
            stack_trace,
        }
    }

    // -- Noise: the lines around the part that identifies the family --------

    /// Application log lines, as a service prints them before it fails.
    fn app_logs(&mut self, t: &mut Text, lo: u64, hi: u64) {
        for _ in 0..self.int(lo, hi) {
            let line = self.app_log_line();
            t.line(line);
        }
    }

    fn app_log_line(&mut self) -> String {
        let ts = self.timestamp();
        match self.below(9) {
            0 => format!(
                "{ts} INFO  worker: claimed item {} from queue {}",
                self.int(1, 99_999),
                self.pick(QUEUES)
            ),
            1 => format!(
                "{ts} DEBUG http: GET /api/v1/{}s/{} -> 200 in {}ms",
                self.pick(NOUNS),
                self.int(1, 99_999),
                self.int(1, 900)
            ),
            2 => format!(
                "{ts} WARN  pool: connection {} idle for {}s, recycling",
                self.int(1, 32),
                self.int(30, 600)
            ),
            3 => format!(
                "{ts} INFO  {}: {} finished in {}ms",
                self.pick(RUST_MODULES),
                self.snake(),
                self.int(1, 5000)
            ),
            4 => format!(
                "{ts} DEBUG cache: miss key={}:{}",
                self.pick(NOUNS),
                self.hex(12)
            ),
            5 => format!(
                "{ts} INFO  request_id={} user_id={} status=ok",
                self.uuid(),
                self.int(1, 50_000)
            ),
            6 => format!("{ts} TRACE scheduler: next run at {}", self.timestamp()),
            7 => format!(
                "[{}] {} {}",
                self.pick(&["INFO", "info", "I"]),
                self.pick(&["Loaded", "Synced", "Skipped", "Queued"]),
                self.pick(&[
                    "3 plugins",
                    "fixtures",
                    "the schema",
                    "42 rows",
                    "config.toml"
                ])
            ),
            _ => format!(
                "{ts} INFO  loaded {} {}s from /srv/data/{}.json",
                self.int(0, 5000),
                self.pick(NOUNS),
                self.snake()
            ),
        }
    }

    /// cargo's progress lines.
    fn cargo_progress(&mut self, t: &mut Text) {
        if self.chance(30) {
            t.line("    Updating crates.io index");
            for _ in 0..self.int(1, 6) {
                let (name, minor) = self.pick(CRATES);
                let line = format!("  Downloaded {name} v{minor}.{}", self.int(0, 40));
                t.line(line);
            }
        }
        // Each crate compiles once, so a subset in a shuffled order.
        let mut crates = CRATES.to_vec();
        self.shuffle(&mut crates);
        let compiled = self.below(crates.len());
        for (name, minor) in &crates[..compiled] {
            let compiling = self.paint("1;32", "Compiling");
            t.line(format!(
                "   {compiling} {name} v{minor}.{}",
                self.int(0, 40)
            ));
        }
    }

    /// npm's warnings before the error.
    fn npm_warnings(&mut self, t: &mut Text) {
        for _ in 0..self.int(0, 4) {
            let line = match self.below(3) {
                0 => format!(
                    "npm WARN deprecated {}@{}: This version is no longer supported.",
                    self.pick(NPM_PACKAGES),
                    self.version()
                ),
                1 => format!(
                    "npm WARN EBADENGINE Unsupported engine {{ package: '{}@{}', required: {{ node: '>=18' }} }}",
                    self.pick(NPM_PACKAGES),
                    self.version()
                ),
                _ => format!(
                    "npm WARN config {} Use `--{}` instead.",
                    self.pick(&["production", "optional", "global"]),
                    self.pick(&["omit=dev", "include=optional", "location=global"])
                ),
            };
            t.line(line);
        }
    }

    /// A minified JSON document of at least `min_len` bytes: the very long
    /// lines some tools print (a request echo, a response body, a fixture).
    fn minified_json(&mut self, min_len: usize) -> String {
        let mut json = String::from("{\"items\":[");
        while json.len() < min_len {
            if !json.ends_with('[') {
                json.push(',');
            }
            json.push_str(&format!(
                "{{\"id\":{},\"sku\":\"{}-{}\",\"qty\":{},\"owner\":\"{}\",\"tags\":[\"{}\",\"{}\"],\"updated_at\":\"{}\"}}",
                self.int(1, 999_999),
                self.pick(NOUNS),
                self.hex(6),
                self.int(1, 40),
                self.snake(),
                self.pick(VERBS),
                self.pick(NOUNS),
                self.timestamp()
            ));
        }
        json.push_str("]}");
        json
    }
}

/// 2025-09-01T00:00:00Z in milliseconds since the Unix epoch.
const SEPTEMBER_2025: u64 = 1_756_684_800_000;

/// `ms` since the Unix epoch as `2025-11-14T22:25:07.123Z` (Howard Hinnant's
/// days-to-civil algorithm, for dates after 1970 only).
fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let z = secs / 86_400 + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let time = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        time / 3600,
        time % 3600 / 60,
        time % 60,
        ms % 1000
    )
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// pytest's `===== text =====` lines, 80 columns wide.
fn banner(fill: char, text: &str) -> String {
    let text = format!(" {text} ");
    let left = 80usize.saturating_sub(text.len()) / 2;
    let right = 80usize.saturating_sub(text.len() + left);
    let fill = |n| std::iter::repeat_n(fill, n).collect::<String>();
    format!("{}{text}{}", fill(left), fill(right))
}

// ---------------------------------------------------------------------------
// JavaScript and TypeScript

fn js_test_file(g: &mut Gen) -> String {
    if g.chance(50) {
        format!("src/{}/{}.test.tsx", g.pick(JS_DIRS), g.pascal())
    } else {
        format!("src/{}/{}.test.ts", g.pick(JS_DIRS), g.camel())
    }
}

fn js_test_name(g: &mut Gen) -> String {
    match g.below(3) {
        0 => format!("should {} the {}", g.pick(VERBS), g.pick(NOUNS)),
        1 => format!(
            "{}s {} when {} is missing",
            g.pick(VERBS),
            g.pick(NOUNS),
            g.pick(FIELDS)
        ),
        _ => format!(
            "renders {} {}",
            g.pick(NOUNS),
            g.pick(&["header", "list", "form", "modal"])
        ),
    }
}

fn npm_test(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("npm test", 1));
    t.line("");
    t.line(format!("> {}@{} test", g.pick(JS_APPS), g.version()));
    t.line("> jest --ci");
    t.line("");
    let passed_suites = g.int(3, 60);
    for _ in 0..g.int(0, 8) {
        let line = format!("{} {}", g.paint("1;32", "PASS"), js_test_file(g));
        t.line(line);
    }
    let failed_suites = g.int(1, 3);
    let mut failed_tests = 0;
    for _ in 0..failed_suites {
        let file = js_test_file(g);
        let line = format!("{} {file} ({} s)", g.paint("1;31", "FAIL"), g.seconds(9));
        t.line(line);
        for _ in 0..g.int(1, 2) {
            failed_tests += 1;
            let line = format!("  ● {} › {}", g.pascal(), js_test_name(g));
            t.line(line);
            t.line("");
            jest_assertion(g, &mut t, &file);
        }
    }
    // A test printing a large fixture: the occasional multi-KB line.
    if g.chance(4) {
        t.line("  console.log");
        let json = g.minified_json(2500);
        t.line(format!("    {json}"));
    }
    let passed_tests = g.int(5, 400);
    t.line(format!(
        "Test Suites: {failed_suites} failed, {passed_suites} passed, {} total",
        failed_suites + passed_suites
    ));
    t.line(format!(
        "Tests:       {failed_tests} failed, {passed_tests} passed, {} total",
        failed_tests + passed_tests
    ));
    t.line("Snapshots:   0 total");
    t.line(format!("Time:        {} s", g.seconds(60)));
    t.line("Ran all test suites.");
    Out::plain(t)
}

fn jest_assertion(g: &mut Gen, t: &mut Text, file: &str) {
    let line = g.int(10, 300);
    match g.below(3) {
        0 => {
            t.line("    expect(received).toBe(expected) // Object.is equality");
            t.line("");
            t.line(format!("    Expected: \"{}\"", g.snake()));
            t.line(format!(
                "    Received: {}",
                g.pick(&["undefined", "null", "\"\""])
            ));
        }
        1 => {
            t.line("    expect(received).toEqual(expected) // deep equality");
            t.line("");
            t.line(format!("    - Expected  - {}", g.int(1, 4)));
            t.line(format!("    + Received  + {}", g.int(1, 4)));
            t.line("");
            t.line("      Object {");
            for _ in 0..g.int(1, 4) {
                let field = g.pick(FIELDS);
                t.line(format!("    -   \"{field}\": \"{}\",", g.snake()));
                t.line(format!("    +   \"{field}\": {},", g.int(0, 999)));
            }
            t.line("      }");
        }
        _ => {
            t.line("    expect(jest.fn()).toHaveBeenCalledTimes(expected)");
            t.line("");
            t.line(format!("    Expected number of calls: {}", g.int(1, 3)));
            t.line("    Received number of calls: 0");
        }
    }
    t.line("");
    t.line(format!(
        "      {} |     const result = {}(input);",
        line - 1,
        g.camel()
    ));
    t.line(format!("    > {line} |     expect(result).toBe(expected);"));
    t.line(format!(
        "      {} |                    ^",
        " ".repeat(line.to_string().len())
    ));
    t.line("");
    t.line(format!(
        "      at Object.<anonymous> ({file}:{line}:{})",
        g.int(5, 40)
    ));
    t.line("");
}

/// A package name that is not in the registry: a typo or a private scope.
fn missing_package(g: &mut Gen) -> String {
    let name = g.pick(NPM_PACKAGES);
    match g.below(3) {
        0 => format!("{name}{}", g.pick(&["s", "x", "-js", "2"])),
        1 => format!("@acme-internal/{}", g.pick(NOUNS)),
        _ => name.replacen('e', "ee", 1),
    }
}

fn npm_install_404(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("npm install", 1));
    g.npm_warnings(&mut t);
    let package = missing_package(g);
    let escaped = package.replace('/', "%2f");
    let range = format!("^{}", g.version());
    t.line("npm ERR! code E404");
    t.line(format!(
        "npm ERR! 404 Not Found - GET https://registry.npmjs.org/{escaped} - Not found"
    ));
    t.line("npm ERR! 404");
    t.line(format!(
        "npm ERR! 404  '{package}@{range}' is not in this registry."
    ));
    t.line("npm ERR! 404");
    t.line("npm ERR! 404 Note that you can also install from a");
    t.line("npm ERR! 404 tarball, folder, http url, or git url.");
    t.line("");
    let log = g.timestamp().replace([':', '.'], "_");
    t.line(format!(
        "npm ERR! A complete log of this run can be found in: /root/.npm/_logs/{log}-debug-0.log"
    ));
    Out::plain(t)
}

fn npm_install_eresolve(g: &mut Gen) -> Out {
    let mut t = Text::default();
    let command = if g.chance(50) {
        "npm install".to_string()
    } else {
        format!("npm install {}", g.pick(NPM_PACKAGES))
    };
    t.line(command_failed(&command, 1));
    g.npm_warnings(&mut t);
    let (peer, dependent) = g.pick_two(NPM_PACKAGES);
    let found = g.int(16, 19);
    t.line("npm ERR! code ERESOLVE");
    t.line("npm ERR! ERESOLVE unable to resolve dependency tree");
    t.line("npm ERR!");
    t.line(format!(
        "npm ERR! While resolving: {}@{}",
        g.pick(JS_APPS),
        g.version()
    ));
    t.line(format!(
        "npm ERR! Found: {peer}@{found}.{}.{}",
        g.int(0, 9),
        g.int(0, 9)
    ));
    t.line(format!("npm ERR! node_modules/{peer}"));
    t.line(format!(
        "npm ERR!   {peer}@\"^{found}.0.0\" from the root project"
    ));
    t.line("npm ERR!");
    t.line("npm ERR! Could not resolve dependency:");
    t.line(format!(
        "npm ERR! peer {peer}@\"^{}.0.0\" from {dependent}@{}",
        found - 1,
        g.version()
    ));
    t.line(format!("npm ERR! node_modules/{dependent}"));
    t.line("npm ERR!");
    t.line("npm ERR! Fix the upstream dependency conflict, or retry");
    t.line("npm ERR! this command with --force or --legacy-peer-deps");
    t.line("npm ERR! to accept an incorrect (and potentially broken) dependency resolution.");
    Out::plain(t)
}

fn npm_ci_lockfile(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("npm ci", 1));
    t.line("npm ERR! code EUSAGE");
    t.line("npm ERR!");
    t.line("npm ERR! `npm ci` can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync. Please update your lock file with `npm install` before continuing.");
    t.line("npm ERR!");
    for _ in 0..g.int(1, 5) {
        let line = if g.chance(50) {
            format!(
                "npm ERR! Missing: {}@{} from lock file",
                g.pick(NPM_PACKAGES),
                g.version()
            )
        } else {
            let package = g.pick(NPM_PACKAGES);
            format!(
                "npm ERR! Invalid: lock file's {package}@{} does not satisfy {package}@{}",
                g.version(),
                g.version()
            )
        };
        t.line(line);
    }
    t.line("npm ERR!");
    t.line("npm ERR! Clean install a project");
    t.line("npm ERR!");
    t.line("npm ERR! Usage:");
    t.line("npm ERR! npm ci");
    Out::plain(t)
}

/// Where a Node TypeError is thrown: the top application frame.
struct NodeSite {
    file: &'static str,
    line: u32,
    col: u32,
    func: &'static str,
    code: &'static str,
    callers: &'static [(&'static str, &'static str, u32, u32)],
}

const NODE_RENDER: NodeSite = NodeSite {
    file: "/app/src/render/header.js",
    line: 42,
    col: 35,
    func: "renderHeader",
    code: "    const title = settings[section][key];",
    callers: &[
        ("renderPage", "/app/src/render/page.js", 17, 10),
        ("handleRequest", "/app/src/server.js", 88, 22),
    ],
};

const NODE_ORDERS: NodeSite = NodeSite {
    file: "/app/src/api/handlers/orders.js",
    line: 131,
    col: 28,
    func: "serializeOrder",
    code: "    return { id, ...order.lines[0][key] };",
    callers: &[
        ("Array.map", "<anonymous>", 0, 0),
        ("listOrders", "/app/src/api/handlers/orders.js", 64, 31),
    ],
};

fn node_version(g: &mut Gen) -> &'static str {
    g.pick(&["v18.19.1", "v20.11.1", "v20.18.0", "v22.11.0"])
}

fn node_undefined(g: &mut Gen, site: &NodeSite) -> Out {
    let key = g.pick(FIELDS);
    let error = format!("TypeError: Cannot read properties of undefined (reading '{key}')");
    let mut t = Text::default();
    let command = g.pick(&["node dist/server.js", "npm start", "npm run test:e2e"]);
    t.line(command_failed(command, 1));
    g.app_logs(&mut t, 0, 5);
    t.line(format!("{}:{}", site.file, site.line));
    t.line(site.code);
    t.line(format!("{}^", " ".repeat(site.col as usize - 1)));
    t.line("");
    t.line(&error);
    let mut trace = Text::default();
    trace.line(&error);
    trace.line(format!(
        "    at {} ({}:{}:{})",
        site.func, site.file, site.line, site.col
    ));
    for (func, file, line, col) in site.callers {
        if *line == 0 {
            trace.line(format!("    at {func} ({file})"));
        } else {
            trace.line(format!("    at {func} ({file}:{line}:{col})"));
        }
    }
    // Framework and runtime frames come and go with the entry point.
    if g.chance(60) {
        for _ in 0..g.int(1, 4) {
            let frame = format!(
                "    at {} (/app/node_modules/express/lib/router/{}.js:{}:{})",
                g.pick(&[
                    "Layer.handle",
                    "next",
                    "Route.dispatch",
                    "Function.process_params"
                ]),
                g.pick(&["layer", "route", "index"]),
                g.int(10, 400),
                g.int(3, 30)
            );
            trace.line(frame);
        }
    }
    if g.chance(50) {
        trace.line(
            "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
        );
    }
    t.line("");
    t.line(format!("Node.js {}", node_version(g)));
    Out::traced(t, trace)
}

fn node_econnrefused(g: &mut Gen) -> Out {
    let (service_host, port) = g.pick(&[
        ("127.0.0.1", 5432),
        ("127.0.0.1", 6379),
        ("127.0.0.1", 3000),
        ("::1", 8080),
        ("127.0.0.1", 27017),
    ]);
    let mut t = Text::default();
    let command = g.pick(&["npm run test:integration", "npm run migrate", "npm start"]);
    t.line(command_failed(command, 1));
    g.app_logs(&mut t, 0, 6);
    let error = format!("Error: connect ECONNREFUSED {service_host}:{port}");
    t.line(&error);
    let mut trace = Text::default();
    trace.line(&error);
    trace.line(format!(
        "    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:{}:16) {{",
        g.pick(&[1555, 1595, 1607, 1610])
    ));
    trace.line("  errno: -111,");
    trace.line("  code: 'ECONNREFUSED',");
    trace.line("  syscall: 'connect',");
    trace.line(format!("  address: '{service_host}',"));
    trace.line(format!("  port: {port}"));
    trace.line("}");
    Out::traced(t, trace)
}

fn ts_file(g: &mut Gen) -> String {
    format!(
        "src/{}/{}.ts{}",
        g.pick(JS_DIRS),
        g.camel(),
        g.pick(&["", "x"])
    )
}

fn tsc_ts2322(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npx tsc --noEmit", "npm run typecheck"]),
        2,
    ));
    let errors = g.int(1, 5);
    let mut files = Vec::new();
    for _ in 0..errors {
        let file = ts_file(g);
        let (source, target) = g.pick_two(TS_TYPES);
        let (line, col) = (g.int(1, 400), g.int(1, 60));
        let code = g.paint("90", "error TS2322");
        t.line(format!(
            "{file}({line},{col}): {code}: Type '{source}' is not assignable to type '{target}'."
        ));
        files.push((file, line));
    }
    t.line("");
    let noun = if errors == 1 { "error" } else { "errors" };
    t.line(format!("Found {errors} {noun} in {} files.", files.len()));
    if errors > 1 {
        t.line("");
        t.line("Errors  Files");
        for (file, line) in &files {
            t.line(format!("     1  {file}:{line}"));
        }
    }
    Out::plain(t)
}

fn tsc_ts2307(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npx tsc --noEmit", "npm run typecheck"]),
        2,
    ));
    let errors = g.int(1, 3);
    for _ in 0..errors {
        let line = format!(
            "{}({},{}): error TS2307: Cannot find module '{}' or its corresponding type declarations.",
            ts_file(g),
            g.int(1, 30),
            g.int(15, 40),
            g.pick(NPM_PACKAGES)
        );
        t.line(line);
    }
    t.line("");
    let noun = if errors == 1 { "error" } else { "errors" };
    t.line(format!("Found {errors} {noun}."));
    Out::plain(t)
}

fn eslint(g: &mut Gen) -> Out {
    const RULES: &[(&str, &str)] = &[
        ("'{}' is assigned a value but never used", "@typescript-eslint/no-unused-vars"),
        ("Unexpected any. Specify a different type", "@typescript-eslint/no-explicit-any"),
        ("'{}' is not defined", "no-undef"),
        ("React Hook useEffect has a missing dependency: '{}'. Either include it or remove the dependency array", "react-hooks/exhaustive-deps"),
        ("Expected '===' and instead saw '=='", "eqeqeq"),
        ("Unexpected console statement", "no-console"),
    ];
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npx eslint . --max-warnings 0", "npm run lint"]),
        1,
    ));
    let mut problems = 0;
    for _ in 0..g.int(1, 3) {
        t.line("");
        let file = ts_file(g);
        t.line(format!("/app/{}", g.paint("4", &file)));
        // ESLint reports a file's problems in line order.
        let mut lines: Vec<(u64, u64)> = (0..g.int(1, 4))
            .map(|_| (g.int(1, 300), g.int(1, 60)))
            .collect();
        lines.sort_unstable();
        for (line, col) in lines {
            problems += 1;
            let (message, rule) = g.pick(RULES);
            let message = message.replace("{}", &g.camel());
            let level = g.paint("31", "error");
            let rule = g.paint("2", rule);
            t.line(format!("  {line}:{col}  {level}  {message}  {rule}"));
        }
    }
    t.line("");
    t.line(g.paint(
        "1;31",
        &format!("✖ {problems} problems ({problems} errors, 0 warnings)"),
    ));
    Out::plain(t)
}

fn vite_unresolved(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("npm run build", 1));
    t.line("");
    t.line(format!("> {}@{} build", g.pick(JS_APPS), g.version()));
    t.line("> tsc && vite build");
    t.line("");
    t.line(format!(
        "vite v5.{}.{} building for production...",
        g.int(0, 4),
        g.int(0, 12)
    ));
    t.line("transforming...");
    t.line(format!("✓ {} modules transformed.", g.int(20, 3000)));
    let failed = format!("x Build failed in {}s", g.seconds(30));
    t.line(g.paint("31", &failed));
    t.line("error during build:");
    let import = format!("@/{}/{}", g.pick(JS_DIRS), g.pascal());
    let from = format!("/app/src/{}/{}.tsx", g.pick(JS_DIRS), g.pascal());
    t.line(format!(
        "[vite]: Rollup failed to resolve import \"{import}\" from \"{from}\"."
    ));
    t.line("This is most likely unintended because it can break your application at runtime.");
    t.line("If you do want to externalize this module explicitly add it to");
    t.line("`build.rollupOptions.external`");
    if g.chance(5) {
        // Rollup echoes the minified chunk it was building.
        let json = g.minified_json(3000);
        t.line(format!(
            "    at file:///app/node_modules/vite/dist/node/chunks/dep.js:1:1 {json}"
        ));
    }
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Rust

fn rust_file(g: &mut Gen) -> String {
    format!("src/{}.rs", g.pick(RUST_MODULES))
}

/// rustc's source snippet: the arrow, the gutter, the line and its marker.
fn rustc_snippet(t: &mut Text, file: &str, line: u64, code: &str, marker: &str, label: &str) {
    let col = code.find(marker).unwrap_or(0);
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    t.line(format!("{pad}--> {file}:{line}:{}", col + 1));
    t.line(format!("{pad} |"));
    t.line(format!("{line} | {code}"));
    t.line(format!(
        "{pad} | {}{} {label}",
        " ".repeat(col),
        "^".repeat(marker.chars().count())
    ));
}

fn cargo_error_tail(t: &mut Text, code: &str, krate: &str, errors: u64) {
    t.line("");
    t.line(format!(
        "For more information about this error, try `rustc --explain {code}`."
    ));
    let plural = if errors == 1 { "error" } else { "errors" };
    t.line(format!(
        "error: could not compile `{krate}` (lib) due to {errors} previous {plural}"
    ));
}

fn rustc_e0308(g: &mut Gen) -> Out {
    const TYPES: &[(&str, &str, &str)] = &[
        ("u32", "usize", "len()"),
        ("String", "&str", "as_str()"),
        ("i64", "Option<i64>", "get(0)"),
        ("Vec<u8>", "&[u8]", "as_bytes()"),
        ("PathBuf", "&Path", "parent().unwrap()"),
        ("u64", "Result<u64, Error>", "parse::<u64>()"),
    ];
    let mut t = Text::default();
    let krate = g.pick(WORKSPACE_CRATES);
    t.line(command_failed("cargo build --workspace", 101));
    g.cargo_progress(&mut t);
    let errors = g.int(1, 3);
    for _ in 0..errors {
        let (expected, found, call) = g.pick(TYPES);
        let var = g.pick(FIELDS);
        let source = g.pick(NOUNS);
        let expr = format!("{source}.{call}");
        let code = format!("        let {var}: {expected} = {expr};");
        t.line(format!(
            "{}: mismatched types",
            g.paint("1;31", "error[E0308]")
        ));
        let file = format!("crates/{krate}/{}", rust_file(g));
        let label = format!("expected `{expected}`, found `{found}`");
        rustc_snippet(&mut t, &file, g.int(10, 900), &code, &expr, &label);
        t.line("");
    }
    cargo_error_tail(&mut t, "E0308", krate, errors);
    Out::plain(t)
}

fn rustc_e0425(g: &mut Gen) -> Out {
    let mut t = Text::default();
    let krate = g.pick(WORKSPACE_CRATES);
    t.line(command_failed(
        g.pick(&["cargo build", "cargo check --all-targets"]),
        101,
    ));
    g.cargo_progress(&mut t);
    let name = g.pick(FIELDS);
    let typo = format!("{name}s");
    t.line(format!(
        "{}: cannot find value `{typo}` in this scope",
        g.paint("1;31", "error[E0425]")
    ));
    let code = format!("        if self.{} > {typo} {{", g.pick(FIELDS));
    let file = rust_file(g);
    let label = format!("help: a local variable with a similar name exists: `{name}`");
    rustc_snippet(&mut t, &file, g.int(10, 900), &code, &typo, &label);
    cargo_error_tail(&mut t, "E0425", krate, 1);
    Out::plain(t)
}

fn rustc_e0502(g: &mut Gen) -> Out {
    let mut t = Text::default();
    let krate = g.pick(WORKSPACE_CRATES);
    t.line(command_failed("cargo build", 101));
    g.cargo_progress(&mut t);
    let name = format!("{}s", g.pick(NOUNS));
    let line = g.int(20, 900);
    let file = rust_file(g);
    let width = (line + 3).to_string().len();
    let pad = " ".repeat(width);
    t.line(format!(
        "{}: cannot borrow `{name}` as mutable because it is also borrowed as immutable",
        g.paint("1;31", "error[E0502]")
    ));
    t.line(format!("{pad}--> {file}:{}:9", line + 2));
    t.line(format!("{pad} |"));
    t.line(format!(
        "{line:>width$} |         let first = {name}.first();"
    ));
    t.line(format!(
        "{pad} |                     {} immutable borrow occurs here",
        "-".repeat(name.len())
    ));
    t.line("..."); // rustc elides the lines between
    t.line(format!("{:>width$} |         {name}.push(next);", line + 2));
    t.line(format!(
        "{pad} |         {} mutable borrow occurs here",
        "^".repeat(name.len() + 11)
    ));
    t.line(format!(
        "{:>width$} |         tracing::debug!(?first);",
        line + 3
    ));
    t.line(format!(
        "{pad} |                          ----- immutable borrow later used here"
    ));
    cargo_error_tail(&mut t, "E0502", krate, 1);
    Out::plain(t)
}

fn cargo_test_assert(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["cargo test", "cargo test --workspace"]),
        101,
    ));
    g.cargo_progress(&mut t);
    t.line(format!(
        "     Running unittests src/lib.rs (target/debug/deps/{}-{})",
        g.pick(WORKSPACE_CRATES).replace('-', "_"),
        g.hex(16)
    ));
    t.line("");
    let total = g.int(5, 200);
    t.line(format!("running {total} tests"));
    let failing: Vec<String> = (0..g.int(1, 2))
        .map(|_| {
            format!(
                "{}::tests::{}",
                g.pick(RUST_MODULES).replace('/', "::"),
                g.snake()
            )
        })
        .collect();
    for _ in 0..g.int(0, 10) {
        let line = format!(
            "test {}::tests::{} ... {}",
            g.pick(RUST_MODULES).replace('/', "::"),
            g.snake(),
            g.paint("32", "ok")
        );
        t.line(line);
    }
    for name in &failing {
        t.line(format!("test {name} ... {}", g.paint("31", "FAILED")));
    }
    t.line("");
    t.line("failures:");
    t.line("");
    for name in &failing {
        t.line(format!("---- {name} stdout ----"));
        t.line("");
        t.line(format!(
            "thread '{name}' panicked at {}:{}:{}:",
            rust_file(g),
            g.int(20, 900),
            g.int(5, 9)
        ));
        if g.chance(60) {
            t.line("assertion `left == right` failed");
            if g.chance(5) {
                // A large Vec compared whole: one long line.
                let json = g.minified_json(2000);
                t.line(format!("  left: {json:?}"));
            } else {
                t.line(format!("  left: {}", g.int(0, 50)));
            }
            t.line(format!(" right: {}", g.int(0, 50)));
        } else {
            t.line(format!(
                "expected {} to be {}, got {:?}",
                g.pick(FIELDS),
                g.pick(&["Pending", "Retrying", "Done", "Failed"]),
                g.pick(&["Pending", "Retrying", "Done", "Failed"])
            ));
        }
        t.line("note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace");
        t.line("");
    }
    t.line("");
    t.line("failures:");
    for name in &failing {
        t.line(format!("    {name}"));
    }
    t.line("");
    let failed = failing.len() as u64;
    t.line(format!(
        "test result: {}. {} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out; finished in {}s",
        g.paint("31", "FAILED"),
        total - failed,
        g.seconds(20)
    ));
    t.line("");
    t.line("error: test failed, to rerun pass `--lib`");
    Out::plain(t)
}

/// A Rust panic site: the panic location and the top application frame
/// (fixed per family), the std frames that lead to it, and its callers.
struct RustSite {
    file: &'static str,
    line: u32,
    col: u32,
    func: &'static str,
    /// The std frames between the panic machinery and the application frame.
    std_frames: &'static [(&'static str, &'static str)],
    callers: &'static [(&'static str, &'static str, u32, u32)],
    /// The panic message; `{}` is replaced by a variable part.
    message: &'static str,
}

const UNWRAP_NONE: &str = "called `Option::unwrap()` on a `None` value";

const UNWRAP_WORKER: RustSite = RustSite {
    file: "src/queue/worker.rs",
    line: 88,
    col: 41,
    func: "dlq_worker::queue::worker::claim_next",
    std_frames: &[
        ("core::panicking::panic", "core/src/panicking.rs:148:5"),
        ("core::option::unwrap_failed", "core/src/option.rs:2015:5"),
    ],
    callers: &[
        (
            "dlq_worker::queue::worker::run",
            "src/queue/worker.rs",
            41,
            13,
        ),
        ("dlq_worker::main", "dlq/src/main.rs", 22, 5),
    ],
    message: UNWRAP_NONE,
};

const UNWRAP_CONFIG: RustSite = RustSite {
    file: "src/config/profile.rs",
    line: 212,
    col: 30,
    func: "dlq_worker::config::profile::load_profile",
    std_frames: UNWRAP_WORKER.std_frames,
    callers: &[
        ("dlq_worker::config::load", "src/config/mod.rs", 57, 19),
        ("dlq_worker::main", "dlq/src/main.rs", 14, 18),
    ],
    message: UNWRAP_NONE,
};

const INDEX_TOKENS: RustSite = RustSite {
    file: "src/parse/tokens.rs",
    line: 57,
    col: 18,
    func: "dlq_worker::parse::tokens::Lexer::peek",
    std_frames: &[(
        "core::panicking::panic_bounds_check",
        "core/src/panicking.rs:266:5",
    )],
    callers: &[
        (
            "dlq_worker::parse::expr::parse_filter",
            "src/parse/expr.rs",
            140,
            23,
        ),
        ("dlq_worker::cli::list", "dlq/src/cli/list.rs", 33, 17),
        ("dlq_worker::main", "dlq/src/main.rs", 31, 9),
    ],
    message: "index out of bounds: the len is {} but the index is {}",
};

const SERDE_MANIFEST: RustSite = RustSite {
    file: "src/manifest.rs",
    line: 48,
    col: 63,
    func: "dlq_worker::manifest::Manifest::read",
    std_frames: &[("core::result::unwrap_failed", "core/src/result.rs:1679:5")],
    callers: &[
        ("dlq_worker::jobs::start", "src/jobs.rs", 77, 20),
        ("dlq_worker::main", "dlq/src/main.rs", 40, 13),
    ],
    message: "called `Result::unwrap()` on an `Err` value: Error(\"missing field `{}`\", line: {}, column: {})",
};

/// Toolchains in the wild: the commit hash in std's paths differs.
const RUSTC_HASHES: &[&str] = &[
    "90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf",
    "4d91de4e48198da2e33413efdcd9cd2cc0c46688",
    "17067e9ac6d7e98f18d4a3b4ae0ab3a5a2a2b1a0",
];

fn rust_panic(g: &mut Gen, site: &RustSite) -> Out {
    let message = match site.message.matches("{}").count() {
        0 => site.message.to_string(),
        2 => {
            let len = g.int(0, 8);
            site.message.replacen("{}", &len.to_string(), 1).replacen(
                "{}",
                &g.int(len, len + 5).to_string(),
                1,
            )
        }
        _ => site
            .message
            .replacen("{}", g.pick(FIELDS), 1)
            .replacen("{}", &g.int(1, 60).to_string(), 1)
            .replacen("{}", &g.int(1, 40).to_string(), 1),
    };
    let thread = g.pick(&[
        "main",
        "main",
        "tokio-runtime-worker",
        "worker-1",
        "worker-3",
    ]);
    let mut t = Text::default();
    let command = format!(
        "cargo run --release -- {} --queue {}",
        g.pick(&["process", "drain", "list", "retry"]),
        g.pick(QUEUES)
    );
    t.line(command_failed(&command, 101));
    t.line(format!(
        "    Finished `release` profile [optimized] target(s) in {}s",
        g.seconds(90)
    ));
    g.app_logs(&mut t, 0, 8);
    t.line(format!(
        "thread '{thread}' panicked at {}:{}:{}:",
        site.file, site.line, site.col
    ));
    t.line(&message);
    t.line("note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace");

    let rustc = g.pick(RUSTC_HASHES);
    let mut trace = Text::default();
    trace.line("stack backtrace:");
    let mut frames: Vec<(String, String)> = vec![
        (
            "rust_begin_unwind".into(),
            format!("/rustc/{rustc}/library/std/src/panicking.rs:665:5"),
        ),
        (
            "core::panicking::panic_fmt".into(),
            format!("/rustc/{rustc}/library/core/src/panicking.rs:76:14"),
        ),
    ];
    for (func, at) in site.std_frames {
        frames.push((func.to_string(), format!("/rustc/{rustc}/library/{at}")));
    }
    frames.push((
        site.func.into(),
        format!("./{}:{}:{}", site.file, site.line, site.col),
    ));
    for (func, file, line, col) in site.callers {
        // Async callers run inside tokio's machinery, sometimes inlined away.
        if *func != "dlq_worker::main" && g.chance(30) {
            frames.push((
                "<core::pin::Pin<P> as core::future::future::Future>::poll".into(),
                format!("/rustc/{rustc}/library/core/src/future/future.rs:123:9"),
            ));
        }
        frames.push((func.to_string(), format!("./{file}:{line}:{col}")));
    }
    frames.push((
        "core::ops::function::FnOnce::call_once".into(),
        format!("/rustc/{rustc}/library/core/src/ops/function.rs:250:5"),
    ));
    for (i, (func, at)) in frames.iter().enumerate() {
        trace.line(format!("{i:>4}: {func}"));
        trace.line(format!("             at {at}"));
    }
    trace.line(
        "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.",
    );
    Out::traced(t, trace)
}

fn cargo_version_select(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["cargo build", "cargo update", "cargo test"]),
        101,
    ));
    t.line("    Updating crates.io index");
    let (krate, minor) = g.pick(CRATES);
    let major = minor.split('.').next().unwrap_or("1");
    let wanted = format!("{major}.{}", g.int(90, 999));
    t.line(format!(
        "error: failed to select a version for the requirement `{krate} = \"^{wanted}\"`"
    ));
    let candidates: Vec<String> = (0..g.int(3, 12))
        .map(|i| format!("{major}.{}.{}", 40 - i, g.int(0, 9)))
        .collect();
    t.line(format!(
        "candidate versions found which didn't match: {}",
        candidates.join(", ")
    ));
    t.line("location searched: crates.io index");
    let member = g.pick(WORKSPACE_CRATES);
    t.line(format!(
        "required by package `{member} v{} (/app/crates/{member})`",
        g.version()
    ));
    t.line("perhaps a crate was updated and forgotten to be re-vendored?");
    Out::plain(t)
}

fn clippy_denied(g: &mut Gen) -> Out {
    const LINTS: &[(&str, &str)] = &[
        ("this `if` has identical blocks", "if_same_then_else"),
        (
            "the loop variable `i` is only used to index `{}`",
            "needless_range_loop",
        ),
        ("redundant clone", "redundant_clone"),
        (
            "this expression creates a reference which is immediately dereferenced by the compiler",
            "needless_borrow",
        ),
        ("called `map(..).flatten()` on `Option`", "map_flatten"),
        ("length comparison to zero", "len_zero"),
        (
            "this function has too many arguments (9/7)",
            "too_many_arguments",
        ),
    ];
    let mut t = Text::default();
    let krate = g.pick(WORKSPACE_CRATES);
    t.line(command_failed(
        "cargo clippy --all-targets -- -D warnings",
        101,
    ));
    g.cargo_progress(&mut t);
    t.line(format!(
        "    Checking {krate} v{} (/app/crates/{krate})",
        g.version()
    ));
    let errors = g.int(1, 4);
    for _ in 0..errors {
        let (message, lint) = g.pick(LINTS);
        let message = message.replace("{}", &format!("{}s", g.pick(NOUNS)));
        t.line(format!("{}: {message}", g.paint("1;31", "error")));
        let line = format!(
            "   --> {}:{}:{}",
            rust_file(g),
            g.int(10, 900),
            g.int(5, 40)
        );
        t.line(line);
        t.line(format!(
            "    = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#{lint}"
        ));
        t.line(format!(
            "    = note: `-D clippy::{}` implied by `-D warnings`",
            lint.replace('_', "-")
        ));
        t.line("");
    }
    let plural = if errors == 1 { "error" } else { "errors" };
    t.line(format!(
        "error: could not compile `{krate}` (lib) due to {errors} previous {plural}"
    ));
    Out::plain(t)
}

fn rustfmt_check(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("cargo fmt --all -- --check", 1));
    for _ in 0..g.int(1, 3) {
        t.line(format!("Diff in /app/{}:{}:", rust_file(g), g.int(1, 900)));
        let (var, call) = (g.pick(FIELDS), g.snake());
        let args = format!(
            "&request.{}, &self.config.{}",
            g.pick(FIELDS),
            g.pick(FIELDS)
        );
        t.line(format!(
            "     async fn {}(&self) -> Result<()> {{",
            g.snake()
        ));
        let old = format!("-        let {var} = self.{call}({args}).await?;");
        t.line(g.paint("31", &old));
        t.line(g.paint("32", &format!("+        let {var} = self")));
        t.line(g.paint("32", &format!("+            .{call}({args})")));
        t.line(g.paint("32", "+            .await?;"));
        t.line("");
    }
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Python

fn python_version(g: &mut Gen) -> &'static str {
    g.pick(&["3.10", "3.11", "3.12"])
}

fn py_command(g: &mut Gen) -> String {
    let prefix = g.pick(&["", "", "poetry run ", "uv run "]);
    match g.below(3) {
        0 => format!("{prefix}python -m app.worker --job {}", g.int(1, 99_999)),
        1 => format!("{prefix}python -m app.worker --queue {}", g.pick(QUEUES)),
        _ => format!("{prefix}python scripts/run_job.py {}", g.uuid()),
    }
}

fn pytest_failed(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["pytest -q", "pytest", "python -m pytest tests"]),
        1,
    ));
    let rows = g.int(1, 5);
    for row in 1..=rows {
        let dots: String = (0..g.int(10, 70))
            .map(|_| match g.below(100) {
                0..3 => 'F',
                3..8 => 's',
                _ => '.',
            })
            .collect();
        t.line(format!("{dots:<70} [{:>3}%]", row * 100 / rows));
    }
    t.line(g.paint("31", &banner('=', "FAILURES")));
    let failures: Vec<(String, String, String)> = (0..g.int(1, 3))
        .map(|_| {
            let file = format!("tests/test_{}.py", g.pick(NOUNS));
            let name = format!("test_{}", g.snake());
            let want = g.pick(&[200, 201, 204]);
            let got = g.pick(&[400, 401, 403, 404, 409, 422, 500]);
            (file, name, format!("assert {got} == {want}"))
        })
        .collect();
    for (file, name, assertion) in &failures {
        t.line(g.paint("31", &banner('_', name)));
        t.line("");
        t.line(format!("    def {name}(client):"));
        t.line(format!(
            "        resp = client.post(\"/api/{}\", json={{\"{}\": {}}})",
            g.pick(NOUNS),
            g.pick(FIELDS),
            g.int(0, 99)
        ));
        let want = assertion.rsplit(' ').next().unwrap_or("200");
        t.line(format!(">       assert resp.status_code == {want}"));
        t.line(format!("E       {assertion}"));
        t.line("");
        t.line(format!("{file}:{}: AssertionError", g.int(5, 300)));
        for _ in 0..g.int(0, 3) {
            // Captured log output from the test, different every run.
            let line = g.app_log_line();
            t.line(line);
        }
    }
    t.line(banner('=', "short test summary info"));
    for (file, name, assertion) in &failures {
        t.line(format!(
            "{} {file}::{name} - AssertionError: {assertion}",
            g.paint("31", "FAILED")
        ));
    }
    let skipped = if g.chance(50) {
        format!(", {} skipped", g.int(1, 9))
    } else {
        String::new()
    };
    let summary = format!(
        "{} failed, {} passed{skipped} in {}s",
        failures.len(),
        g.int(1, 600),
        g.seconds(90)
    );
    t.line(g.paint("31", &banner('=', &summary)));
    Out::plain(t)
}

fn pytest_collection(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(g.pick(&["pytest -q", "pytest"]), 2));
    let test_file = format!("tests/test_{}.py", g.pick(NOUNS));
    let module = g.pick(PY_MODULES);
    let py = python_version(g);
    t.line(banner('=', "ERRORS"));
    t.line(banner('_', &format!("ERROR collecting {test_file}")));
    t.line(format!(
        "ImportError while importing test module '/app/{test_file}'."
    ));
    t.line("Hint: make sure your test modules/packages have valid Python names.");
    t.line("Traceback:");
    t.line(format!(
        "/usr/lib/python{py}/importlib/__init__.py:126: in import_module"
    ));
    t.line("    return _bootstrap._gcd_import(name[level:], package, level)");
    t.line(format!("{test_file}:{}: in <module>", g.int(1, 12)));
    t.line(format!("    import {module}"));
    t.line(format!(
        "E   ModuleNotFoundError: No module named '{module}'"
    ));
    t.line(banner('=', "short test summary info"));
    t.line(format!("ERROR {test_file}"));
    t.line(banner('!', "Interrupted: 1 error during collection"));
    t.line(banner('=', &format!("1 error in {}s", g.seconds(3))));
    Out::plain(t)
}

/// Where a Python exception is raised: the top application frame, fixed
/// per family.
struct PySite {
    file: &'static str,
    line: u32,
    func: &'static str,
    code: &'static str,
    /// Python 3.11+ underlines the failing expression.
    carets: &'static str,
}

const KEYERROR_ORDERS: PySite = PySite {
    file: "app/handlers/orders.py",
    line: 57,
    func: "resolve_customer",
    code: "customer = payload[key]",
    carets: "           ~~~~~~~^^^^^",
};

const KEYERROR_CONFIG: PySite = PySite {
    file: "app/config/loader.py",
    line: 112,
    func: "load_settings",
    code: "value = section[name]",
    carets: "        ~~~~~~~^^^^^^",
};

const TYPEERROR_INVOICE: PySite = PySite {
    file: "app/billing/invoice.py",
    line: 73,
    func: "compute_total",
    code: "total = subtotal + line.discount",
    carets: "        ~~~~~~~~~^~~~~~~~~~~~~~~",
};

const FETCH_JOB: PySite = PySite {
    file: "app/clients/api.py",
    line: 41,
    func: "fetch_job",
    code: "resp = self.session.get(url, timeout=self.timeout)",
    carets: "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
};

fn py_frame(t: &mut Text, file: &str, line: u64, func: &str, code: &str) {
    t.line(format!("  File \"{file}\", line {line}, in {func}"));
    t.line(format!("    {code}"));
}

/// The frames above the failing one: how the job was entered, which varies
/// (a worker loop, a CLI, a celery task).
fn py_entry_frames(g: &mut Gen, t: &mut Text, py: &str) {
    match g.below(3) {
        0 => {
            py_frame(t, "/app/app/worker.py", 88, "<module>", "main()");
            py_frame(t, "/app/app/worker.py", 80, "main", "process(job)");
        }
        1 => {
            py_frame(
                t,
                "/app/scripts/run_job.py",
                23,
                "<module>",
                "sys.exit(run(sys.argv[1:]))",
            );
            py_frame(t, "/app/app/cli.py", 61, "run", "return dispatch(args.job)");
        }
        _ => {
            let site = format!("/usr/local/lib/python{py}/site-packages/celery");
            let line = g.pick(&[451, 453, 477]);
            py_frame(
                t,
                &format!("{site}/app/trace.py"),
                line,
                "trace_task",
                "R = retval = fun(*args, **kwargs)",
            );
            py_frame(
                t,
                &format!("{site}/app/trace.py"),
                736,
                "__protected_call__",
                "return self.run(*args, **kwargs)",
            );
            py_frame(
                t,
                "/app/app/tasks.py",
                34,
                "process_job",
                "return process(job)",
            );
        }
    }
}

/// A traceback ending at `site`, with `exception` as its last line.
fn py_traceback(g: &mut Gen, site: &PySite, exception: &str) -> Text {
    let py = python_version(g);
    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    py_entry_frames(g, &mut trace, py);
    let file = format!("/app/{}", site.file);
    py_frame(
        &mut trace,
        &file,
        u64::from(site.line),
        site.func,
        site.code,
    );
    if py != "3.10" {
        trace.line(format!("    {}", site.carets));
    }
    trace.line(exception);
    trace
}

fn py_key_error(g: &mut Gen, site: &PySite) -> Out {
    let exception = format!("KeyError: '{}'", g.pick(FIELDS));
    let mut t = Text::default();
    t.line(command_failed(&py_command(g), 1));
    g.app_logs(&mut t, 0, 8);
    t.line(&exception);
    let trace = py_traceback(g, site, &exception);
    Out::traced(t, trace)
}

fn py_type_error(g: &mut Gen) -> Out {
    let left = g.pick(&["int", "float", "Decimal"]);
    let exception =
        format!("TypeError: unsupported operand type(s) for +: '{left}' and 'NoneType'");
    let mut t = Text::default();
    t.line(command_failed(&py_command(g), 1));
    g.app_logs(&mut t, 0, 8);
    t.line(&exception);
    let trace = py_traceback(g, &TYPEERROR_INVOICE, &exception);
    Out::traced(t, trace)
}

/// requests failing at the same call site: the server refused the
/// connection (nothing listening) or reset it (it crashed mid-request).
fn py_connection(g: &mut Gen, reset: bool) -> Out {
    let py = python_version(g);
    let site_packages = format!("/usr/local/lib/python{py}/site-packages");
    let (host, port) = g.pick(&[("api", 8000), ("localhost", 8080), ("jobs-service", 80)]);
    let path = format!("/v1/jobs/{}", g.int(1, 99_999));
    let object = format!("0x7f{}", g.hex(10));

    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    let urllib3 = format!("{site_packages}/urllib3/connectionpool.py");
    if reset {
        py_frame(
            &mut trace,
            &urllib3,
            793,
            "urlopen",
            "response = self._make_request(",
        );
        py_frame(
            &mut trace,
            &urllib3,
            537,
            "_make_request",
            "response = conn.getresponse()",
        );
        py_frame(
            &mut trace,
            &format!("/usr/lib/python{py}/http/client.py"),
            1428,
            "getresponse",
            "response.begin()",
        );
        py_frame(
            &mut trace,
            &format!("/usr/lib/python{py}/socket.py"),
            720,
            "readinto",
            "return self._sock.recv_into(b)",
        );
        trace.line("ConnectionResetError: [Errno 104] Connection reset by peer");
    } else {
        let connection = format!("{site_packages}/urllib3/connection.py");
        py_frame(
            &mut trace,
            &connection,
            198,
            "_new_conn",
            "sock = connection.create_connection(",
        );
        py_frame(
            &mut trace,
            &format!("{site_packages}/urllib3/util/connection.py"),
            73,
            "create_connection",
            "sock.connect(sa)",
        );
        trace.line("ConnectionRefusedError: [Errno 111] Connection refused");
    }
    trace.line("");
    trace.line("During handling of the above exception, another exception occurred:");
    trace.line("");
    trace.line("Traceback (most recent call last):");
    py_entry_frames(g, &mut trace, py);
    let file = format!("/app/{}", FETCH_JOB.file);
    py_frame(
        &mut trace,
        &file,
        u64::from(FETCH_JOB.line),
        FETCH_JOB.func,
        FETCH_JOB.code,
    );
    if py != "3.10" {
        trace.line(format!("    {}", FETCH_JOB.carets));
    }
    // requests' own frames: how many depends on the session's adapters.
    let requests = format!("{site_packages}/requests");
    if g.chance(70) {
        py_frame(
            &mut trace,
            &format!("{requests}/sessions.py"),
            602,
            "get",
            "return self.request(\"GET\", url, **kwargs)",
        );
    }
    py_frame(
        &mut trace,
        &format!("{requests}/sessions.py"),
        703,
        "send",
        "r = adapter.send(request, **kwargs)",
    );
    py_frame(
        &mut trace,
        &format!("{requests}/adapters.py"),
        g.pick(&[519, 682, 700]),
        "send",
        "raise ConnectionError(e, request=request)",
    );
    let exception = if reset {
        "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))".to_string()
    } else {
        format!(
            "requests.exceptions.ConnectionError: HTTPConnectionPool(host='{host}', port={port}): Max retries exceeded with url: {path} (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at {object}>: Failed to establish a new connection: [Errno 111] Connection refused'))"
        )
    };
    trace.line(&exception);

    let mut t = Text::default();
    t.line(command_failed(&py_command(g), 1));
    g.app_logs(&mut t, 0, 6);
    t.line(format!(
        "{} ERROR app.clients.api: GET http://{host}:{port}{path} failed",
        g.timestamp()
    ));
    t.line(exception);
    Out::traced(t, trace)
}

fn py_module_not_found(g: &mut Gen) -> Out {
    let module = g.pick(PY_MODULES);
    let exception = format!("ModuleNotFoundError: No module named '{module}'");
    let mut t = Text::default();
    t.line(command_failed(&py_command(g), 1));
    t.line(&exception);
    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    py_frame(&mut trace, "<frozen runpy>", 198, "_run_module_as_main", "");
    py_frame(
        &mut trace,
        "/app/app/worker.py",
        9,
        "<module>",
        "from app.handlers import registry",
    );
    py_frame(
        &mut trace,
        "/app/app/handlers/__init__.py",
        4,
        "<module>",
        &format!("import {module}"),
    );
    trace.line(exception);
    Out::traced(t, trace)
}

fn mypy(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["mypy app", "mypy --strict app tests"]),
        1,
    ));
    let errors = g.int(1, 6);
    for _ in 0..errors {
        let file = format!(
            "app/{}/{}.py",
            g.pick(&["models", "api", "services", "utils"]),
            g.pick(NOUNS)
        );
        let line = g.int(1, 400);
        let message = match g.below(3) {
            0 => "Incompatible types in assignment (expression has type \"str\", variable has type \"int\")  [assignment]".to_string(),
            1 => format!(
                "Argument 1 to \"{}\" has incompatible type \"str | None\"; expected \"str\"  [arg-type]",
                g.snake()
            ),
            _ => format!(
                "Item \"None\" of \"{} | None\" has no attribute \"{}\"  [union-attr]",
                capitalise(g.pick(NOUNS)),
                g.pick(FIELDS)
            ),
        };
        t.line(format!(
            "{file}:{line}: {} {message}",
            g.paint("31", "error:")
        ));
    }
    t.line(format!(
        "Found {errors} errors in {} files (checked {} source files)",
        g.int(1, errors),
        g.int(20, 400)
    ));
    Out::plain(t)
}

fn pip_no_distribution(g: &mut Gen) -> Out {
    let package = g.pick(&[
        "torch", "numpy", "pandas", "pydantic", "fastapi", "boto3", "httpx",
    ]);
    let major = g.int(1, 3);
    let wanted = format!("{major}.{}.{}", g.int(40, 99), g.int(0, 9));
    let mut t = Text::default();
    t.line(command_failed("pip install -r requirements.txt", 1));
    for _ in 0..g.int(0, 6) {
        let line = format!(
            "Requirement already satisfied: {} in /usr/local/lib/python3.11/site-packages ({})",
            g.pick(PY_MODULES),
            g.version()
        );
        t.line(line);
    }
    let versions: Vec<String> = (0..g.int(3, 20))
        .map(|i| format!("{major}.{i}.{}", g.int(0, 3)))
        .collect();
    t.line(format!(
        "ERROR: Could not find a version that satisfies the requirement {package}=={wanted} (from versions: {})",
        versions.join(", ")
    ));
    t.line(format!(
        "ERROR: No matching distribution found for {package}=={wanted}"
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Go

fn go_module(g: &mut Gen) -> String {
    format!("github.com/{}", g.pick(REPOS))
}

fn go_test_fail(g: &mut Gen) -> Out {
    let module = go_module(g);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["go test ./...", "go test -race ./..."]),
        1,
    ));
    for _ in 0..g.int(0, 5) {
        let line = format!("ok  \t{module}/{}\t{}s", g.pick(GO_PACKAGES), g.seconds(3));
        t.line(line);
    }
    let package = g.pick(GO_PACKAGES);
    let test = format!("Test{}", g.pascal());
    t.line(format!("--- FAIL: {test} ({}s)", g.seconds(2)));
    if g.chance(50) {
        t.line(format!("    --- FAIL: {test}/{} (0.00s)", g.snake()));
    }
    let file = format!("{}_test.go", g.pick(NOUNS));
    t.line(format!(
        "        {file}:{}: got {:?}, want {:?}",
        g.int(10, 400),
        g.snake(),
        g.snake()
    ));
    t.line("FAIL");
    t.line(format!("FAIL\t{module}/{package}\t{}s", g.seconds(5)));
    if g.chance(40) {
        t.line(format!(
            "?   \t{module}/cmd/{}\t[no test files]",
            g.pick(NOUNS)
        ));
    }
    t.line("FAIL");
    Out::plain(t)
}

fn go_build_undefined(g: &mut Gen) -> Out {
    let module = go_module(g);
    let package = g.pick(GO_PACKAGES);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["go build ./...", "go vet ./..."]),
        1,
    ));
    t.line(format!("# {module}/{package}"));
    for _ in 0..g.int(1, 3) {
        let line = format!(
            "{package}/{}.go:{}:{}: undefined: {}",
            g.pick(NOUNS),
            g.int(5, 600),
            g.int(2, 40),
            g.camel()
        );
        t.line(line);
    }
    Out::plain(t)
}

fn go_nil_pointer(g: &mut Gen) -> Out {
    let module = "github.com/acme/api-server";
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["go run ./cmd/server", "./bin/server"]),
        2,
    ));
    g.app_logs(&mut t, 0, 6);
    t.line("panic: runtime error: invalid memory address or nil pointer dereference");
    t.line(format!(
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x{:x} pc=0x{}]",
        g.pick(&[0x0, 0x8, 0x18, 0x28]),
        g.hex(6)
    ));
    let mut trace = Text::default();
    trace.line(format!("goroutine {} [running]:", g.int(1, 400)));
    trace.line(format!(
        "{module}/internal/store.(*Repo).FindUser(0x0, {{0x{}, 0x{:x}}})",
        g.hex(10),
        g.int(4, 64)
    ));
    trace.line(format!("\t/app/internal/store/repo.go:88 +0x{}", g.hex(2)));
    trace.line(format!(
        "{module}/internal/api.(*Server).handleUser(0x{}, {{0x{}, 0x{}}}, 0x{})",
        g.hex(10),
        g.hex(6),
        g.hex(10),
        g.hex(10)
    ));
    trace.line(format!("\t/app/internal/api/user.go:41 +0x{}", g.hex(3)));
    // net/http's frames differ between Go releases.
    let go = g.pick(&["1.22", "1.23"]);
    if g.chance(80) {
        trace.line("net/http.HandlerFunc.ServeHTTP(...)");
        trace.line(format!(
            "\t/usr/local/go/src/net/http/server.go:{} +0x29",
            if go == "1.22" { 2166 } else { 2171 }
        ));
    }
    trace.line(format!(
        "net/http.(*conn).serve(0x{}, {{0x{}, 0x{}}})",
        g.hex(10),
        g.hex(6),
        g.hex(10)
    ));
    trace.line(format!(
        "\t/usr/local/go/src/net/http/server.go:{} +0x{}",
        if go == "1.22" { 2009 } else { 2092 },
        g.hex(3)
    ));
    trace.line("exit status 2");
    Out::traced(t, trace)
}

fn go_missing_sum(g: &mut Gen) -> Out {
    let module = go_module(g);
    let dependency = g.pick(&[
        "github.com/stretchr/testify/assert",
        "github.com/google/uuid",
        "github.com/jackc/pgx/v5",
        "go.uber.org/zap",
        "github.com/spf13/cobra",
        "golang.org/x/sync/errgroup",
    ]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["go build ./...", "go test ./..."]),
        1,
    ));
    let importer = g.pick(GO_PACKAGES);
    t.line(format!(
        "{importer}/{}.go:{}:2: missing go.sum entry for module providing package {dependency} (imported by {module}/{importer}); to add:",
        g.pick(NOUNS),
        g.int(3, 20),
    ));
    t.line(format!("\tgo get {module}/{importer}"));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Java

fn java_framework_frames(g: &mut Gen, trace: &mut Text) {
    const FRAMES: &[&str] = &[
        "java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)",
        "java.base/java.lang.reflect.Method.invoke(Method.java:580)",
        "org.springframework.web.method.support.InvocableHandlerMethod.doInvoke(InvocableHandlerMethod.java:255)",
        "org.springframework.web.method.support.InvocableHandlerMethod.invokeForRequest(InvocableHandlerMethod.java:188)",
        "org.springframework.web.servlet.mvc.method.annotation.ServletInvocableHandlerMethod.invokeAndHandle(ServletInvocableHandlerMethod.java:118)",
        "org.springframework.web.servlet.DispatcherServlet.doDispatch(DispatcherServlet.java:1089)",
        "org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:140)",
    ];
    let shown = g.int(2, FRAMES.len() as u64) as usize;
    for frame in &FRAMES[..shown] {
        trace.line(format!("\tat {frame}"));
    }
    trace.line(format!("\t... {} more", g.int(20, 90)));
}

fn java_npe(g: &mut Gen) -> Out {
    let thread = format!("http-nio-8080-exec-{}", g.int(1, 10));
    let exception = "java.lang.NullPointerException: Cannot invoke \"com.example.orders.model.Customer.getId()\" because \"customer\" is null";
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&[
            "./gradlew integrationTest",
            "./mvnw verify",
            "./gradlew bootRun",
        ]),
        1,
    ));
    g.app_logs(&mut t, 0, 4);
    t.line(format!(
        "{} ERROR 1 --- [{}] o.a.c.c.C.[.[.[/].[dispatcherServlet]    : Servlet.service() for servlet [dispatcherServlet] threw exception [Request processing failed: {exception}] with root cause",
        g.timestamp(),
        &thread[thread.len() - 15..]
    ));
    let mut trace = Text::default();
    trace.line(format!("Exception in thread \"{thread}\" {exception}"));
    trace
        .line("\tat com.example.orders.service.OrderService.assignCustomer(OrderService.java:123)");
    trace.line("\tat com.example.orders.service.OrderService.create(OrderService.java:88)");
    trace.line("\tat com.example.orders.web.OrderController.create(OrderController.java:57)");
    java_framework_frames(g, &mut trace);
    Out::traced(t, trace)
}

fn java_context(g: &mut Gen) -> Out {
    let test_class = format!("com.example.orders.{}IT", g.pascal());
    let port = g.pick(&[5432, 5433, 15432]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["./gradlew integrationTest", "./mvnw verify"]),
        1,
    ));
    t.line(format!("{test_class} > contextLoads() FAILED"));
    t.line(
        "    java.lang.IllegalStateException at DefaultCacheAwareContextLoaderDelegate.java:180",
    );
    t.line("        Caused by: org.springframework.beans.factory.BeanCreationException at AbstractAutowireCapableBeanFactory.java:1786");
    t.line("            Caused by: org.postgresql.util.PSQLException at ConnectionFactoryImpl.java:346");
    t.line(format!(
        "{} tests completed, {} failed",
        g.int(5, 300),
        g.int(1, 12)
    ));
    let mut trace = Text::default();
    trace.line(format!(
        "java.lang.IllegalStateException: Failed to load ApplicationContext for [WebMergedContextConfiguration@{} testClass = {test_class}, locations = [], classes = [com.example.orders.OrdersApplication]]",
        g.hex(8)
    ));
    trace.line("\tat org.springframework.test.context.cache.DefaultCacheAwareContextLoaderDelegate.loadContext(DefaultCacheAwareContextLoaderDelegate.java:180)");
    trace.line("\tat org.springframework.test.context.support.DefaultTestContext.getApplicationContext(DefaultTestContext.java:130)");
    trace.line(format!("\t... {} more", g.int(40, 80)));
    trace.line("Caused by: org.springframework.beans.factory.BeanCreationException: Error creating bean with name 'entityManagerFactory' defined in class path resource [org/springframework/boot/autoconfigure/orm/jpa/HibernateJpaConfiguration.class]: Unable to open JDBC Connection for DDL execution");
    trace.line("\tat org.springframework.beans.factory.support.AbstractAutowireCapableBeanFactory.initializeBean(AbstractAutowireCapableBeanFactory.java:1786)");
    trace.line(format!("\t... {} more", g.int(40, 80)));
    trace.line(format!(
        "Caused by: org.postgresql.util.PSQLException: Connection to localhost:{port} refused. Check that the hostname and port are correct and that the postmaster is accepting TCP/IP connections."
    ));
    trace.line("\tat org.postgresql.core.v3.ConnectionFactoryImpl.openConnectionImpl(ConnectionFactoryImpl.java:346)");
    trace.line(
        "\tat org.postgresql.core.ConnectionFactory.openConnection(ConnectionFactory.java:54)",
    );
    trace.line(format!("\t... {} more", g.int(40, 80)));
    trace.line("Caused by: java.net.ConnectException: Connection refused");
    trace.line("\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)");
    trace.line("\tat java.base/sun.nio.ch.Net.pollConnectNow(Net.java:682)");
    trace.line(format!("\t... {} more", g.int(20, 40)));
    Out::traced(t, trace)
}

fn maven_surefire(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(command_failed("./mvnw -B verify", 1));
    for _ in 0..g.int(0, 6) {
        let line = format!(
            "[INFO] Tests run: {}, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: {} s -- in com.example.orders.{}Test",
            g.int(1, 40),
            g.seconds(9),
            g.pascal()
        );
        t.line(line);
    }
    t.line("[INFO] ");
    t.line("[INFO] Results:");
    t.line("[INFO] ");
    t.line(format!("[{}] Failures: ", g.paint("1;31", "ERROR")));
    let failures = g.int(1, 3);
    for _ in 0..failures {
        let line = format!(
            "[ERROR]   {}Test.should{}:{} expected: <{}> but was: <{}>",
            capitalise(g.pick(NOUNS)),
            g.pascal(),
            g.int(20, 300),
            g.pick(&["201", "200", "true", "ACTIVE"]),
            g.pick(&["400", "500", "false", "null"])
        );
        t.line(line);
    }
    t.line("[INFO] ");
    t.line(format!(
        "[ERROR] Tests run: {}, Failures: {failures}, Errors: 0, Skipped: {}",
        g.int(20, 900),
        g.int(0, 5)
    ));
    t.line("[INFO] ------------------------------------------------------------------------");
    t.line(format!("[INFO] {}", g.paint("1;31", "BUILD FAILURE")));
    t.line("[INFO] ------------------------------------------------------------------------");
    t.line(format!(
        "[INFO] Total time:  {:02}:{:02} min",
        g.int(0, 9),
        g.int(0, 59)
    ));
    t.line(format!("[INFO] Finished at: {}", g.timestamp()));
    t.line("[INFO] ------------------------------------------------------------------------");
    t.line(format!(
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.{}.{}:test (default-test) on project {}-service: There are test failures.",
        g.int(0, 5),
        g.int(0, 5),
        g.pick(NOUNS)
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// git

fn git_changed_file(g: &mut Gen) -> String {
    match g.below(4) {
        0 => rust_file(g),
        1 => ts_file(g),
        2 => format!("app/{}/{}.py", g.pick(&["models", "api"]), g.pick(NOUNS)),
        _ => g
            .pick(&[
                "package-lock.json",
                "Cargo.lock",
                "README.md",
                "CHANGELOG.md",
            ])
            .to_string(),
    }
}

fn git_pull_conflict(g: &mut Gen) -> Out {
    let base = g.pick(BASE_BRANCHES);
    let repo = g.pick(REPOS);
    let mut t = Text::default();
    if g.chance(60) {
        t.line(command_failed(
            &format!("git pull --no-rebase origin {base}"),
            1,
        ));
        t.line(format!("From github.com:{repo}"));
        t.line(format!(" * branch            {base:<10} -> FETCH_HEAD"));
        t.line(format!(
            "   {}..{}  {base:<10} -> origin/{base}",
            g.hex(7),
            g.hex(7)
        ));
    } else {
        let branch = g.branch();
        t.line(command_failed(&format!("git merge --no-ff {branch}"), 1));
    }
    // Some files merge cleanly; the last one always conflicts.
    let files = g.int(1, 5);
    for i in 1..=files {
        let file = git_changed_file(g);
        t.line(format!("Auto-merging {file}"));
        if i == files || g.chance(60) {
            t.line(format!("CONFLICT (content): Merge conflict in {file}"));
        }
    }
    t.line("Automatic merge failed; fix conflicts and then commit the result.");
    Out::plain(t)
}

fn git_push_non_ff(g: &mut Gen) -> Out {
    let branch = g.branch();
    let repo = g.pick(REPOS);
    let mut t = Text::default();
    t.line(command_failed(&format!("git push origin {branch}"), 1));
    t.line(format!("To github.com:{repo}.git"));
    t.line(format!(
        " ! [rejected]        {branch} -> {branch} (non-fast-forward)"
    ));
    t.line(format!(
        "error: failed to push some refs to 'github.com:{repo}.git'"
    ));
    t.line("hint: Updates were rejected because the tip of your current branch is behind");
    t.line("hint: its remote counterpart. If you want to integrate the remote changes,");
    t.line("hint: use 'git pull' before pushing again.");
    t.line("hint: See the 'Note about fast-forwards' in 'git push --help' for details.");
    Out::plain(t)
}

fn git_push_protected(g: &mut Gen) -> Out {
    let base = g.pick(BASE_BRANCHES);
    let repo = g.pick(REPOS);
    let objects = g.int(3, 60);
    let mut t = Text::default();
    t.line(command_failed(&format!("git push origin {base}"), 1));
    t.line(format!("Enumerating objects: {objects}, done."));
    t.line(format!(
        "Counting objects: 100% ({objects}/{objects}), done."
    ));
    t.line(format!(
        "Delta compression using up to {} threads",
        g.pick(&[2, 4, 8, 16])
    ));
    t.line(format!(
        "Writing objects: 100% ({objects}/{objects}), {}.{:02} KiB | {}.{:02} MiB/s, done.",
        g.int(1, 90),
        g.int(0, 99),
        g.int(1, 20),
        g.int(0, 99)
    ));
    t.line(format!(
        "remote: error: GH006: Protected branch update failed for refs/heads/{base}."
    ));
    t.line("remote: error: Changes must be made through a pull request.");
    t.line(format!("To github.com:{repo}.git"));
    t.line(format!(
        " ! [remote rejected] {base} -> {base} (protected branch hook declined)"
    ));
    t.line(format!(
        "error: failed to push some refs to 'github.com:{repo}.git'"
    ));
    Out::plain(t)
}

fn git_worktree(g: &mut Gen) -> Out {
    let branch = g.branch();
    let session = g.session();
    let other = g.session();
    let repo = g.pick(REPOS).trim_start_matches("acme/");
    let mut t = Text::default();
    t.line(format!(
        "Failed to create worktree for {session}: `git worktree add /work/.prodigy/worktrees/{repo}/{session} {branch}` failed"
    ));
    t.line(format!(
        "fatal: '{branch}' is already checked out at '/work/.prodigy/worktrees/{repo}/{other}'"
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// HTTP

fn github_path(g: &mut Gen) -> String {
    let repo = g.pick(REPOS);
    match g.below(4) {
        0 => format!("/repos/{repo}/pulls?state=open&per_page=100"),
        1 => format!("/repos/{repo}/issues/{}/comments", g.int(1, 4000)),
        2 => format!(
            "/repos/{repo}/actions/runs/{}",
            g.int(1_000_000_000, 9_999_999_999)
        ),
        _ => format!("/repos/{repo}/git/refs/heads/{}", g.branch()),
    }
}

fn http_rate_limit(g: &mut Gen) -> Out {
    let mut t = Text::default();
    let method = g.pick(&["GET", "GET", "POST", "PATCH"]);
    t.line(format!(
        "GitHub API request failed: 429 Too Many Requests ({method} https://api.github.com{})",
        github_path(g)
    ));
    t.line("x-ratelimit-limit: 5000");
    t.line("x-ratelimit-remaining: 0");
    t.line(format!(
        "x-ratelimit-reset: {}",
        g.clock / 1000 + g.int(1, 3600)
    ));
    t.line(format!(
        "x-github-request-id: {}:{}:{}:{}:{}",
        g.hex(4).to_uppercase(),
        g.hex(4).to_uppercase(),
        g.hex(6).to_uppercase(),
        g.hex(6).to_uppercase(),
        g.hex(8).to_uppercase()
    ));
    t.line(format!("retry-after: {}", g.int(1, 3600)));
    t.line(format!(
        "{{\"message\":\"API rate limit exceeded for installation ID {}.\",\"documentation_url\":\"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting\"}}",
        g.int(10_000_000, 99_999_999)
    ));
    Out::plain(t)
}

/// A gateway error from one of the same few hosts: 502 (the upstream
/// answered badly) or 503 (no upstream available), nginx's page either way.
fn http_gateway(g: &mut Gen, status: u16) -> Out {
    let reason = if status == 502 {
        "Bad Gateway"
    } else {
        "Service Unavailable"
    };
    let host = g.pick(&[
        "artifacts.acme.dev",
        "api.acme.dev",
        "registry.internal.acme.dev",
    ]);
    let (method, path) = match g.below(3) {
        0 => ("POST", format!("/api/v2/uploads/{}", g.uuid())),
        1 => (
            "GET",
            format!("/v1/{}s/{}", g.pick(NOUNS), g.int(1, 99_999)),
        ),
        _ => (
            "PUT",
            format!("/artifacts/{}/{}.tar.gz", g.branch(), g.hex(12)),
        ),
    };
    let mut t = Text::default();
    t.line(format!(
        "HTTP request failed: {status} {reason} ({method} https://{host}{path})"
    ));
    t.line(format!("x-request-id: {}", g.uuid()));
    if status == 503 && g.chance(50) {
        t.line(format!("retry-after: {}", g.int(5, 120)));
    }
    t.line("<html>");
    t.line(format!("<head><title>{status} {reason}</title></head>"));
    t.line("<body>");
    t.line(format!("<center><h1>{status} {reason}</h1></center>"));
    t.line(format!(
        "<hr><center>nginx/1.{}.{}</center>",
        g.int(22, 27),
        g.int(0, 3)
    ));
    t.line("</body>");
    t.line("</html>");
    Out::plain(t)
}

fn http_unauthorized(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(format!(
        "GitHub API request failed: 401 Unauthorized ({} https://api.github.com{})",
        g.pick(&["GET", "POST"]),
        github_path(g)
    ));
    t.line(format!(
        "x-github-request-id: {}:{}",
        g.hex(4).to_uppercase(),
        g.hex(8).to_uppercase()
    ));
    t.line("{\"message\":\"Bad credentials\",\"documentation_url\":\"https://docs.github.com/rest\",\"status\":\"401\"}");
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// LLM and agent

fn request_id(g: &mut Gen) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789";
    let tail: String = (0..22).map(|_| char::from(g.pick(ALPHABET))).collect();
    format!("req_011C{tail}")
}

/// The agent's own log lines before an API failure: its turns and tools.
/// The agent's own log lines before a failure: its last few turns (up to
/// `last`) and the tools they used.
fn agent_turns(g: &mut Gen, t: &mut Text, last: u64) {
    let shown = g.int(0, 6).min(last);
    for turn in last + 1 - shown..=last {
        let tool = match g.below(4) {
            0 => format!("Read({})", git_changed_file(g)),
            1 => format!("Bash({})", g.pick(COMMANDS)),
            2 => format!("Edit({})", git_changed_file(g)),
            _ => format!("Grep(\"{}\")", g.snake()),
        };
        t.line(format!("[agent] turn {turn}: tool_use {tool}"));
    }
}

fn llm_context_length(g: &mut Gen) -> Out {
    let limit = g.pick(&[200_000, 200_000, 1_000_000]);
    let tokens = limit + g.int(1, limit / 4);
    let mut t = Text::default();
    let last = g.int(20, 200);
    agent_turns(g, &mut t, last);
    t.line(format!(
        "API Error: 400 {{\"type\":\"error\",\"error\":{{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: {tokens} tokens > {limit} maximum\"}},\"request_id\":\"{}\"}}",
        request_id(g)
    ));
    Out::plain(t)
}

/// The API's own errors: overloaded (529) or an internal error (500), the
/// same JSON shape with a different type.
fn llm_api_error(g: &mut Gen, overloaded: bool) -> Out {
    let (status, kind, text) = if overloaded {
        (529, "overloaded_error", "Overloaded")
    } else {
        (500, "api_error", "Internal server error")
    };
    let mut t = Text::default();
    let last = g.int(1, 80);
    agent_turns(g, &mut t, last);
    let attempts = g.int(1, 10);
    for attempt in 1..attempts {
        let line = format!(
            "Retrying in {}.{} seconds… (attempt {attempt}/{attempts})",
            g.int(0, 30),
            g.int(0, 9)
        );
        t.line(line);
    }
    t.line(format!(
        "API Error: {status} {{\"type\":\"error\",\"error\":{{\"type\":\"{kind}\",\"message\":\"{text}\"}},\"request_id\":\"{}\"}}",
        request_id(g)
    ));
    Out::plain(t)
}

fn llm_invalid_tool_json(g: &mut Gen) -> Out {
    let tool = g.pick(&["Edit", "Write", "MultiEdit", "Bash", "TodoWrite"]);
    let reason = g.pick(&[
        "expected `,` or `}`",
        "EOF while parsing a string",
        "invalid escape",
        "control character (\\u0000-\\u001F) found while parsing a string",
    ]);
    let mut t = Text::default();
    let last = g.int(1, 80);
    agent_turns(g, &mut t, last);
    let raw = tool_input(g, tool);
    let column = g.int(10, raw.len() as u64 - 1);
    t.line(format!(
        "Agent error: invalid tool call from model: failed to parse input for tool `{tool}` as JSON: {reason} at line 1 column {column}"
    ));
    // The raw input is echoed, cut off where the parser stopped.
    t.line(format!("raw input: {}", &raw[..column as usize]));
    Out::plain(t)
}

/// A tool call's JSON input as a model writes it; now and then one that
/// carries a whole file (a line of several kilobytes).
fn tool_input(g: &mut Gen, tool: &str) -> String {
    let path = format!("/work/{}", git_changed_file(g));
    let body = if g.chance(6) {
        g.minified_json(3000).replace('"', "\\\"")
    } else {
        format!(
            "let {} = {}({});",
            g.pick(FIELDS),
            g.camel(),
            g.pick(FIELDS)
        )
    };
    match tool {
        "Bash" => format!(
            "{{\"command\":\"{} && echo \\\"{body}\\\"\",\"timeout\":{}}}",
            g.pick(COMMANDS),
            g.int(1, 10) * 60_000
        ),
        "TodoWrite" => format!(
            "{{\"todos\":[{{\"content\":\"{} {}\",\"status\":\"in_progress\"}},{{\"content\":\"{body}\",\"status\":\"pending\"}}]}}",
            capitalise(g.pick(VERBS)),
            g.pick(NOUNS)
        ),
        _ => format!(
            "{{\"file_path\":\"{path}\",\"old_string\":\"{}\",\"new_string\":\"{body}\"}}",
            g.snake()
        ),
    }
}

fn agent_max_turns(g: &mut Gen) -> Out {
    let max = g.pick(&[30, 50, 100]);
    let mut t = Text::default();
    t.line(format!(
        "Agent stopped before completing the task: reached the maximum number of turns ({max})"
    ));
    t.line(format!("Last tool call: Bash({})", g.pick(COMMANDS)));
    t.line(format!(
        "Session {} used {} input tokens, {} output tokens",
        g.session(),
        g.int(100_000, 9_000_000),
        g.int(5_000, 400_000)
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Timeouts

fn command_timeout(g: &mut Gen) -> Out {
    let limit = g.pick(&[120, 300, 600, 900]);
    let mut t = Text::default();
    t.line(format!(
        "command timed out after {limit}s: {}",
        g.pick(COMMANDS)
    ));
    if g.chance(70) {
        t.line("last output:");
        g.app_logs(&mut t, 1, 12);
    }
    Out::plain(t)
}

fn agent_timeout(g: &mut Gen) -> Out {
    let limit = g.pick(&[900, 1800, 3600]);
    let turns = g.int(1, 120);
    let mut t = Text::default();
    t.line(format!(
        "agent timed out after {limit} seconds ({}, {turns} turns, last activity {})",
        g.session(),
        g.timestamp()
    ));
    if g.chance(50) {
        agent_turns(g, &mut t, turns);
    }
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Resources

fn oom_killed(g: &mut Gen) -> Out {
    let (command, process) = g.pick(&[
        ("cargo build --release", "rustc"),
        ("npm run build", "node"),
        ("pytest -n 8", "python3"),
        ("./gradlew test", "java"),
        ("go test ./...", "go"),
    ]);
    let mut t = Text::default();
    t.line(command_failed(command, 137));
    g.app_logs(&mut t, 0, 6);
    t.line("Killed");
    if g.chance(50) {
        t.line(format!(
            "[{}.{:06}] Memory cgroup out of memory: Killed process {} ({process}) total-vm:{}kB, anon-rss:{}kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:{}kB oom_score_adj:0",
            g.int(100, 999_999),
            g.int(0, 999_999),
            g.int(100, 99_999),
            g.int(1_000_000, 16_000_000),
            g.int(500_000, 8_000_000),
            g.int(1000, 30_000)
        ));
    }
    Out::plain(t)
}

fn node_heap_oom(g: &mut Gen) -> Out {
    let pid = g.int(100, 99_999);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npm run build", "npx tsc --noEmit", "npm test"]),
        134,
    ));
    t.line("");
    t.line("<--- Last few GCs --->");
    t.line("");
    for _ in 0..g.int(1, 3) {
        let heap = g.int(2000, 4090);
        let line = format!(
            "[{pid}:0x{}] {:>8} ms: Mark-Compact {heap}.{} ({}.{}) -> {}.{} ({}.{}) MB, {}.{:02} / 0.00 ms  (average mu = 0.{:03}, current mu = 0.{:03}) allocation failure; scavenge might not succeed",
            g.hex(7),
            g.int(10_000, 300_000),
            g.int(0, 9),
            heap + 90,
            g.int(0, 9),
            heap - 10,
            g.int(0, 9),
            heap + 92,
            g.int(0, 9),
            g.int(500, 3000),
            g.int(0, 99),
            g.int(0, 300),
            g.int(0, 300)
        );
        t.line(line);
    }
    t.line("");
    t.line("<--- JS stacktrace --->");
    t.line("");
    t.line("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory");
    let mut trace = Text::default();
    let frames = [
        "node::OOMErrorHandler(char const*, v8::OOMDetails const&) [node]",
        "v8::Utils::ReportOOMFailure(v8::internal::Isolate*, char const*, v8::OOMDetails const&) [node]",
        "v8::internal::V8::FatalProcessOutOfMemory(v8::internal::Isolate*, char const*, v8::OOMDetails const&) [node]",
        "v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace, v8::internal::GarbageCollectionReason, v8::GCCallbackFlags) [node]",
        "v8::internal::Runtime_AllocateInYoungGeneration(int, unsigned long*, v8::internal::Isolate*) [node]",
    ];
    for (i, frame) in frames.iter().enumerate() {
        trace.line(format!("{:>2}: 0x{} {frame}", i + 1, g.hex(6)));
    }
    trace.line(format!(" 6: 0x{} ", g.hex(12)));
    Out::traced(t, trace)
}

fn disk_full(g: &mut Gen) -> Out {
    let mut t = Text::default();
    // The same root cause surfaces through whichever tool was writing.
    match g.below(4) {
        0 => {
            t.line(command_failed("cargo build", 101));
            g.cargo_progress(&mut t);
            t.line(format!(
                "error: failed to write /app/target/debug/deps/lib{}-{}.rlib: No space left on device (os error 28)",
                g.pick(CRATES).0,
                g.hex(16)
            ));
        }
        1 => {
            t.line(command_failed("npm ci", 1));
            t.line("npm ERR! code ENOSPC");
            t.line("npm ERR! syscall write");
            t.line("npm ERR! errno -28");
            t.line(format!(
                "npm ERR! nospc ENOSPC: no space left on device, write '/app/node_modules/.staging/{}-{}/package.json'",
                g.pick(NPM_PACKAGES).replace('/', "-"),
                g.hex(8)
            ));
            t.line(
                "npm ERR! nospc There appears to be insufficient space on your system to finish.",
            );
        }
        2 => {
            t.line(command_failed("docker build -t app .", 1));
            t.line(format!(
                "ERROR: failed to solve: failed to copy files: write /var/lib/docker/overlay2/{}/diff/app/{}: no space left on device",
                g.hex(64),
                git_changed_file(g)
            ));
        }
        _ => {
            t.line(command_failed(
                &format!("git checkout -b {}", g.branch()),
                128,
            ));
            t.line(format!(
                "fatal: sha1 file '.git/objects/{}/{}' write error: No space left on device",
                g.hex(2),
                g.hex(38)
            ));
        }
    }
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Permissions

fn permission_path(g: &mut Gen) -> Out {
    let path = match g.below(3) {
        0 => format!(
            "/var/cache/{}/{}.db",
            g.pick(WORKSPACE_CRATES),
            g.pick(NOUNS)
        ),
        1 => format!("/work/.prodigy/state/{}/{}.json", g.session(), g.snake()),
        _ => format!("/app/{}", git_changed_file(g)),
    };
    let mut t = Text::default();
    t.line(format!(
        "Failed to {} {path}: Permission denied (os error 13)",
        g.pick(&["write", "open", "create", "rename"])
    ));
    Out::plain(t)
}

fn docker_socket(g: &mut Gen) -> Out {
    let (command, endpoint) = g.pick(&[
        ("docker ps", "/v1.47/containers/json"),
        ("docker build -t app .", "/_ping"),
        ("docker compose up -d", "/v1.45/containers/json?all=1"),
    ]);
    let mut t = Text::default();
    t.line(command_failed(command, 1));
    t.line(format!(
        "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock{endpoint}\": dial unix /var/run/docker.sock: connect: permission denied"
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Network

fn dns_failure(g: &mut Gen) -> Out {
    let host = g.pick(&[
        "github.com",
        "registry.npmjs.org",
        "index.crates.io",
        "pypi.org",
        "proxy.golang.org",
        "api.acme.dev",
    ]);
    let mut t = Text::default();
    if g.chance(50) {
        let repo = g.pick(REPOS);
        t.line(command_failed("git fetch origin", 128));
        t.line(format!(
            "fatal: unable to access 'https://{host}/{repo}.git/': Could not resolve host: {host}"
        ));
    } else {
        t.line(command_failed(
            &format!("curl -fsSL https://{host}/{}", g.snake()),
            6,
        ));
        t.line(format!("curl: (6) Could not resolve host: {host}"));
    }
    Out::plain(t)
}

fn tls_expired(g: &mut Gen) -> Out {
    let host = g.pick(&["registry.acme.dev", "git.acme.dev", "vault.acme.dev"]);
    let mut t = Text::default();
    t.line(command_failed(
        &format!("docker pull {host}/{}:{}", g.pick(NOUNS), g.version()),
        1,
    ));
    t.line(format!(
        "Error response from daemon: Get \"https://{host}/v2/\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time {}Z is after 2025-08-31T23:59:59Z",
        &g.timestamp()[..19]
    ));
    Out::plain(t)
}

fn dial_timeout(g: &mut Gen) -> Out {
    let ip = g.private_ip();
    let port = g.pick(&[5432, 6379, 9092, 443]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["go run ./cmd/server", "./bin/server migrate"]),
        1,
    ));
    for attempt in 1..=g.int(1, 5) {
        let line = format!(
            "{} WARN  connect attempt {attempt} to {ip}:{port} failed, retrying in {}s",
            g.timestamp(),
            attempt * 2
        );
        t.line(line);
    }
    t.line(format!(
        "failed to connect to database: dial tcp {ip}:{port}: i/o timeout"
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Docker

/// A line of a build step's output, as the tool in that step prints it.
fn build_output_line(g: &mut Gen, tool: &str) -> String {
    match tool {
        "npm" => format!(
            "npm WARN deprecated {}@{}",
            g.pick(NPM_PACKAGES),
            g.version()
        ),
        "cargo" => {
            let (name, minor) = g.pick(CRATES);
            format!("   Compiling {name} v{minor}.{}", g.int(0, 40))
        }
        "pip" => format!("Collecting {}>={}", g.pick(PY_MODULES), g.version()),
        "go" => format!(
            "go: downloading github.com/{}/{} v{}",
            g.pick(NOUNS),
            g.pick(VERBS),
            g.version()
        ),
        _ => format!(
            "Get:{} http://deb.debian.org/debian bookworm/main amd64 lib{}{} [{} kB]",
            g.int(1, 90),
            g.pick(NOUNS),
            g.int(1, 9),
            g.int(10, 900)
        ),
    }
}

fn docker_build_step(g: &mut Gen) -> Out {
    let (run, tool, code) = g.pick(&[
        ("npm ci --omit=dev", "npm", 1),
        ("cargo build --release --locked", "cargo", 101),
        ("pip install --no-cache-dir -r requirements.txt", "pip", 1),
        ("go build -o /out/server ./cmd/server", "go", 1),
        ("apt-get update && apt-get install -y libpq-dev", "apt", 100),
    ]);
    let steps = g.int(5, 12);
    let step = g.int(2, steps);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["docker build -t app .", "docker compose build"]),
        1,
    ));
    t.line("#0 building with \"default\" instance using docker driver");
    let cached = g.int(1, 5);
    for n in 1..=cached {
        t.line(format!(
            "#{n} [internal] load build definition from Dockerfile"
        ));
        t.line(format!("#{n} DONE 0.{}s", g.int(0, 9)));
    }
    let id = cached + g.int(1, 8);
    t.line(format!("#{id} [build {step}/{steps}] RUN {run}"));
    let mut elapsed = 0;
    for _ in 0..g.int(1, 12) {
        elapsed += g.int(1, 3000);
        let line = build_output_line(g, tool);
        t.line(format!(
            "#{id} {}.{:03} {line}",
            elapsed / 1000,
            elapsed % 1000
        ));
    }
    let failed =
        format!("process \"/bin/sh -c {run}\" did not complete successfully: exit code: {code}");
    t.line(format!("#{id} ERROR: {failed}"));
    let line = g.int(5, 40);
    t.line("------");
    t.line(format!("Dockerfile:{line}"));
    t.line("--------------------");
    t.line(format!("  {line:>3} | >>> RUN {run}"));
    t.line("--------------------");
    t.line(format!("ERROR: failed to solve: {failed}"));
    Out::plain(t)
}

fn docker_manifest(g: &mut Gen) -> Out {
    let image = format!(
        "{}/acme/{}:{}",
        g.pick(&["ghcr.io", "docker.io", "registry.acme.dev"]),
        g.pick(NOUNS),
        if g.chance(50) { g.version() } else { g.hex(7) }
    );
    let mut t = Text::default();
    t.line(command_failed(&format!("docker pull {image}"), 1));
    t.line(format!(
        "Error response from daemon: manifest for {image} not found: manifest unknown: manifest unknown"
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Configuration, validation and the agent's own checks

fn missing_env_var(g: &mut Gen) -> Out {
    let var = g.pick(ENV_VARS);
    let mut t = Text::default();
    g.app_logs(&mut t, 0, 3);
    t.line(format!("Error: environment variable {var} is not set"));
    if g.chance(40) {
        t.line(format!(
            "hint: add {var} to .env or export it before running {}",
            g.pick(COMMANDS)
        ));
    }
    Out::plain(t)
}

fn json_parse_error(g: &mut Gen) -> Out {
    let file = g.pick(&[
        ".prodigy/work-items.json",
        "config/settings.json",
        "fixtures/orders.json",
        "package.json",
        "tsconfig.json",
    ]);
    let reason = g.pick(&[
        "expected value",
        "trailing comma",
        "EOF while parsing an object",
        "key must be a string",
        "expected `:`",
    ]);
    let mut t = Text::default();
    t.line(format!(
        "Failed to parse {file}: {reason} at line {} column {}",
        g.int(1, 400),
        g.int(1, 80)
    ));
    Out::plain(t)
}

fn validation_fields(g: &mut Gen) -> Out {
    let mut t = Text::default();
    let errors = g.int(1, 4);
    t.line(format!(
        "Validation failed for work item item_{}: {errors} error{}",
        g.int(1, 9999),
        if errors == 1 { "" } else { "s" }
    ));
    for _ in 0..errors {
        let field = match g.below(3) {
            0 => g.pick(FIELDS).to_string(),
            1 => format!("spec.{}", g.pick(FIELDS)),
            _ => format!("items[{}].{}", g.int(0, 20), g.pick(FIELDS)),
        };
        let line = match g.below(4) {
            0 => format!("  - {field}: is required"),
            1 => format!(
                "  - {field}: must be greater than or equal to 1 (got {})",
                g.int(0, 0)
            ),
            2 => format!(
                "  - {field}: must match ^[a-z0-9-]+$ (got \"{}\")",
                g.pascal()
            ),
            _ => format!(
                "  - {field}: expected string, got {}",
                g.pick(&["null", "number", "array"])
            ),
        };
        t.line(line);
    }
    if g.chance(20) {
        let len = if g.chance(25) { 4000 } else { 200 };
        t.line(format!("input: {}", g.minified_json(len)));
    }
    Out::plain(t)
}

fn no_commits(g: &mut Gen) -> Out {
    let mut t = Text::default();
    t.line(format!(
        "No commits created by agent on branch {} (expected at least 1 new commit since {})",
        g.branch(),
        g.hex(7)
    ));
    if g.chance(50) {
        t.line(format!(
            "git status: {} files modified, 0 staged",
            g.int(0, 12)
        ));
    }
    Out::plain(t)
}

/// One CI script, two exit codes: 1 when a check failed, 2 when the script
/// itself was misused or misconfigured. Only the code tells them apart.
fn script_exit(g: &mut Gen, code: i32) -> Out {
    let mut t = Text::default();
    t.line(command_failed("./scripts/ci-check.sh", code));
    for _ in 0..g.int(0, 4) {
        let step = g.pick(&["lint", "format", "unit tests", "schema check", "licenses"]);
        t.line(format!("==> {step}"));
        g.app_logs(&mut t, 0, 4);
    }
    Out::plain(t)
}

fn postgres_unique(g: &mut Gen) -> Out {
    let user = format!("{}.{}{}", g.pick(VERBS), g.pick(NOUNS), g.int(1, 999));
    let mut t = Text::default();
    t.line(format!(
        "psql:db/seeds/{}.sql:{}: ERROR:  duplicate key value violates unique constraint \"users_email_key\"",
        g.pick(&["users", "fixtures", "demo"]),
        g.int(1, 400)
    ));
    t.line(format!(
        "DETAIL:  Key (email)=({user}@example.com) already exists."
    ));
    Out::plain(t)
}

fn sqlite_locked(g: &mut Gen) -> Out {
    let mut t = Text::default();
    for _ in 0..g.int(0, 4) {
        let line = format!(
            "{} WARN  store: busy, retrying in {}ms",
            g.timestamp(),
            g.int(10, 500)
        );
        t.line(line);
    }
    t.line(format!(
        "Error: SqliteFailure(Error {{ code: DatabaseBusy, extended_code: 5 }}, Some(\"database is locked\")) while {} {}",
        g.pick(&["inserting", "updating", "deleting"]),
        g.pick(NOUNS)
    ));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Fresh families: written after the others, before the miner was tuned
// again, and never looked at while tuning (see `fresh`)

const PY_PINNED: &[&str] = &[
    "pydantic",
    "fastapi",
    "httpx",
    "numpy",
    "pandas",
    "sqlalchemy",
    "boto3",
    "urllib3",
    "protobuf",
    "starlette",
];

fn pip_resolution_impossible(g: &mut Gen) -> Out {
    let (dependency, dependent) = g.pick_two(PY_PINNED);
    let requested = format!("{}.{}.{}", g.int(1, 2), g.int(0, 12), g.int(0, 9));
    let dependent_version = format!("0.{}.{}", g.int(90, 120), g.int(0, 4));
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&[
            "pip install -r requirements.txt",
            "pip install -e .[dev]",
            "python -m pip install -r requirements/ci.txt",
        ]),
        1,
    ));
    for _ in 0..g.int(1, 8) {
        let package = g.pick(PY_MODULES);
        let version = g.version();
        if g.chance(50) {
            t.line(format!("Collecting {package}=={version}"));
        } else {
            t.line(format!(
                "  Downloading {package}-{version}-py3-none-any.whl ({} kB)",
                g.int(10, 900)
            ));
        }
    }
    if g.chance(40) {
        t.line(format!(
            "INFO: pip is looking at multiple versions of {dependent} to determine which version is compatible with other requirements. This could take a while."
        ));
    }
    t.line(format!(
        "ERROR: Cannot install -r requirements.txt (line {}) and {dependency}=={requested} because these package versions have conflicting dependencies.",
        g.int(1, 40)
    ));
    t.line("");
    t.line("The conflict is caused by:");
    t.line(format!("    The user requested {dependency}=={requested}"));
    for _ in 0..g.int(1, 3) {
        let line = format!(
            "    {dependent} {dependent_version} depends on {dependency}>={}.{},<{}",
            g.int(1, 3),
            g.int(0, 9),
            g.int(3, 4)
        );
        t.line(line);
    }
    t.line("");
    t.line("To fix this you could try to:");
    t.line("1. loosen the range of package versions you've specified");
    t.line("2. remove package versions to allow pip to attempt to solve the dependency conflict");
    t.line("");
    t.line("ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts");
    Out::plain(t)
}

fn kubectl_rollout(g: &mut Gen) -> Out {
    let app = g.pick(&[
        "api-server",
        "web-app",
        "billing-worker",
        "orders",
        "webhooks",
    ]);
    let namespace = match g.below(3) {
        0 => "staging".to_string(),
        1 => "production".to_string(),
        _ => format!("preview-{}", g.pick(NOUNS)),
    };
    let replicas = g.int(2, 6);
    let mut t = Text::default();
    let command = if g.chance(50) {
        format!("kubectl rollout status deployment/{app} -n {namespace} --timeout=10m")
    } else {
        format!("kubectl -n {namespace} rollout status deploy/{app}")
    };
    t.line(command_failed(&command, 1));
    if g.chance(30) {
        t.line("Waiting for deployment spec update to be observed...");
    }
    for _ in 0..g.int(1, 6) {
        let line = format!(
            "Waiting for deployment \"{app}\" rollout to finish: {} of {replicas} updated replicas are available...",
            g.int(0, replicas - 1)
        );
        t.line(line);
    }
    t.line(format!(
        "error: deployment \"{app}\" exceeded its progress deadline"
    ));
    Out::plain(t)
}

fn terraform_undeclared(g: &mut Gen) -> Out {
    let (kind, attribute) = g.pick(&[
        ("aws_instance", "instance_type"),
        ("aws_s3_bucket", "bucket"),
        ("aws_lambda_function", "memory_size"),
        ("google_storage_bucket", "location"),
        ("aws_db_instance", "allocated_storage"),
    ]);
    let name = g.pick(NOUNS);
    let variable = match g.below(3) {
        0 => format!("{attribute}_{}", g.pick(&["prod", "default", "override"])),
        1 => g.pick(FIELDS).to_string(),
        _ => format!("{}_{}", g.pick(NOUNS), g.pick(&["name", "count", "size"])),
    };
    let file = g.pick(&["main.tf", "compute.tf", "modules/app/main.tf", "storage.tf"]);
    let line = g.int(3, 200);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&[
            "terraform plan -input=false -out=tfplan",
            "terraform apply -auto-approve",
            "terraform -chdir=infra/staging plan",
        ]),
        1,
    ));
    for _ in 0..g.int(0, 8) {
        let line = format!(
            "{}.{}: Refreshing state... [id={}-{}]",
            g.pick(&[
                "aws_iam_role",
                "aws_security_group",
                "aws_s3_bucket",
                "aws_route53_record"
            ]),
            g.pick(NOUNS),
            g.pick(&["sg", "acme", "role", "Z3"]),
            g.hex(8)
        );
        t.line(line);
    }
    t.line("");
    t.line("Planning failed. Terraform encountered an error while generating this plan.");
    t.line("");
    t.line("╷");
    t.line("│ Error: Reference to undeclared input variable");
    t.line("│ ");
    t.line(format!(
        "│   on {file} line {line}, in resource \"{kind}\" \"{name}\":"
    ));
    t.line(format!("│ {line:>3}:   {attribute} = var.{variable}"));
    t.line("│ ");
    t.line(format!(
        "│ An input variable with the name \"{variable}\" has not been declared. This variable can be declared with a variable \"{variable}\" {{}} block."
    ));
    t.line("╵");
    Out::plain(t)
}

fn jvm_heap_oom(g: &mut Gen) -> Out {
    let thread = g.pick(&[
        "main",
        "pool-1-thread-3",
        "ForkJoinPool.commonPool-worker-7",
    ]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&[
            "java -Xmx512m -jar build/libs/ingest.jar",
            "./gradlew run --args=import",
            "./mvnw -q exec:java",
        ]),
        1,
    ));
    g.app_logs(&mut t, 0, 5);
    if g.chance(50) {
        let pid = g.int(100, 99_999);
        t.line("java.lang.OutOfMemoryError: Java heap space");
        t.line(format!("Dumping heap to java_pid{pid}.hprof ..."));
        t.line(format!(
            "Heap dump file created [{} bytes in {}.{:03} secs]",
            g.int(100_000_000, 600_000_000),
            g.int(0, 9),
            g.int(0, 999)
        ));
    }
    let exception =
        format!("Exception in thread \"{thread}\" java.lang.OutOfMemoryError: Java heap space");
    t.line(&exception);
    let mut trace = Text::default();
    trace.line(&exception);
    const JDK: &[&str] = &[
        "java.base/java.util.Arrays.copyOf(Arrays.java:3537)",
        "java.base/java.util.ArrayList.grow(ArrayList.java:237)",
        "java.base/java.util.ArrayList.grow(ArrayList.java:244)",
        "java.base/java.util.ArrayList.add(ArrayList.java:484)",
        "java.base/java.util.ArrayList.add(ArrayList.java:497)",
    ];
    for frame in &JDK[..g.int(1, JDK.len() as u64) as usize] {
        trace.line(format!("\tat {frame}"));
    }
    trace.line("\tat com.example.ingest.BatchLoader.readAll(BatchLoader.java:71)");
    trace.line("\tat com.example.ingest.BatchLoader.load(BatchLoader.java:44)");
    trace.line("\tat com.example.ingest.Main.main(Main.java:19)");
    Out::traced(t, trace)
}

fn native_segfault(g: &mut Gen) -> Out {
    let input = format!("data/{}-{}.bin", g.pick(NOUNS), g.int(1, 400));
    let args = format!(
        "./build/bin/indexer --input {input} --threads {}",
        g.pick(&[1, 2, 4, 8])
    );
    let pid = g.int(100, 99_999);
    let mut t = Text::default();
    let via_make = g.chance(50);
    if via_make {
        t.line(command_failed("make index", 2));
        t.line(&args);
    } else {
        t.line(command_failed(&args, 139));
    }
    g.app_logs(&mut t, 0, 6);
    if via_make {
        t.line(format!(
            "make: *** [Makefile:{}: index] Segmentation fault (core dumped)",
            g.int(10, 80)
        ));
    } else {
        t.line(format!(
            "/bin/sh: line 1: {pid} Segmentation fault      (core dumped) {args}"
        ));
    }
    if g.chance(30) {
        t.line(format!(
            "[{}.{:06}] indexer[{pid}]: segfault at {} ip 0000{} sp 00007ff{} error {} in indexer[{}+4b000]",
            g.int(100, 999_999),
            g.int(0, 999_999),
            g.pick(&["0", "8", "10"]),
            g.hex(12),
            g.hex(9),
            g.pick(&[4, 6]),
            g.hex(12)
        ));
    }
    Out::plain(t)
}

fn jest_test_timeout(g: &mut Gen) -> Out {
    let timeout = g.pick(&[5000, 10000, 30000]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npm test", "npm run test:integration", "npx jest --ci"]),
        1,
    ));
    t.line("");
    t.line(format!("> {}@{} test", g.pick(JS_APPS), g.version()));
    t.line("> jest --ci");
    t.line("");
    for _ in 0..g.int(0, 6) {
        let line = format!("{} {}", g.paint("1;32", "PASS"), js_test_file(g));
        t.line(line);
    }
    let file = js_test_file(g);
    t.line(format!(
        "{} {file} ({} s)",
        g.paint("1;31", "FAIL"),
        g.seconds(60)
    ));
    let test = js_test_name(g);
    t.line(format!("  ● {} › {test}", g.pascal()));
    t.line("");
    t.line(format!(
        "    thrown: \"Exceeded timeout of {timeout} ms for a test."
    ));
    t.line("    Add a timeout value to this test to increase the timeout, if this is a long-running test. See https://jestjs.io/docs/api#testname-fn-timeout.\"");
    t.line("");
    let line = g.int(10, 300);
    t.line(format!("      {} |", line - 1));
    t.line(format!("    > {line} |   it(\"{test}\", async () => {{"));
    t.line("          |   ^");
    t.line("");
    t.line(format!("      at {file}:{line}:3"));
    t.line(format!(
        "      at Object.<anonymous> ({file}:{}:1)",
        g.int(1, line)
    ));
    t.line("");
    let passed = g.int(5, 400);
    t.line(format!(
        "Test Suites: 1 failed, {} passed, {} total",
        g.int(3, 60),
        g.int(64, 120)
    ));
    t.line(format!(
        "Tests:       1 failed, {passed} passed, {} total",
        passed + 1
    ));
    t.line(format!("Time:        {} s", g.seconds(90)));
    t.line("Ran all test suites.");
    Out::plain(t)
}

fn go_data_race(g: &mut Gen) -> Out {
    let module = "github.com/acme/api-server";
    let dir = "/home/runner/work/api-server/api-server/internal/cache";
    let test = format!("Test{}", g.pascal());
    let address = format!("0x00c000{}", g.hex(6));
    let (writer, reader) = (g.int(7, 90), g.int(7, 90));
    let mut t = Text::default();
    t.line(command_failed("go test -race ./...", 1));
    for _ in 0..g.int(0, 5) {
        let line = format!("ok  \t{module}/{}\t{}s", g.pick(GO_PACKAGES), g.seconds(3));
        t.line(line);
    }
    t.line("==================");
    t.line("WARNING: DATA RACE");
    t.line(format!("Write at {address} by goroutine {writer}:"));
    t.line(format!("  {module}/internal/cache.(*Store).Set()"));
    t.line(format!("      {dir}/store.go:48 +0x{}", g.hex(2)));
    t.line(format!("  {module}/internal/cache.{test}.func1()"));
    t.line(format!(
        "      {dir}/store_test.go:{} +0x{}",
        g.int(10, 200),
        g.hex(2)
    ));
    t.line("");
    t.line(format!("Previous read at {address} by goroutine {reader}:"));
    t.line(format!("  {module}/internal/cache.(*Store).Get()"));
    t.line(format!("      {dir}/store.go:36 +0x{}", g.hex(2)));
    t.line(format!("  {module}/internal/cache.{test}.func2()"));
    t.line(format!(
        "      {dir}/store_test.go:{} +0x{}",
        g.int(10, 200),
        g.hex(2)
    ));
    t.line("");
    t.line(format!("Goroutine {writer} (running) created at:"));
    t.line(format!("  {module}/internal/cache.{test}()"));
    t.line(format!(
        "      {dir}/store_test.go:{} +0x{}",
        g.int(10, 200),
        g.hex(3)
    ));
    t.line("  testing.tRunner()");
    t.line(format!(
        "      /opt/hostedtoolcache/go/1.23.{}/x64/src/testing/testing.go:1690 +0x{}",
        g.int(0, 6),
        g.hex(3)
    ));
    t.line("==================");
    t.line(format!("--- FAIL: {test} (0.0{}s)", g.int(1, 9)));
    t.line("    testing.go:1399: race detected during execution of test");
    t.line("FAIL");
    t.line(format!("FAIL\t{module}/internal/cache\t{}s", g.seconds(2)));
    t.line("FAIL");
    Out::plain(t)
}

fn prisma_migration(g: &mut Gen) -> Out {
    let field = g.pick(FIELDS);
    let table = format!("{}s", g.pick(NOUNS));
    let migration = format!(
        "{}{:02}{:02}{:06}_add_{field}_to_{table}",
        2025,
        g.int(1, 12),
        g.int(1, 28),
        g.int(0, 235_959)
    );
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&["npx prisma migrate deploy", "npm run db:migrate"]),
        1,
    ));
    t.line("Environment variables loaded from .env");
    t.line("Prisma schema loaded from prisma/schema.prisma");
    t.line(format!(
        "Datasource \"db\": PostgreSQL database \"{}\", schema \"public\" at \"{}:5432\"",
        g.pick(&["app", "app_test", "billing"]),
        g.pick(&["localhost", "db", "postgres.internal"])
    ));
    t.line("");
    t.line(format!(
        "{} migrations found in prisma/migrations",
        g.int(3, 80)
    ));
    t.line("");
    t.line(format!("Applying migration `{migration}`"));
    t.line("Error: P3018");
    t.line("");
    t.line("A migration failed to apply. New migrations cannot be applied before the error is recovered from. Read more about how to resolve migration issues in a production database: https://pris.ly/d/migrate-resolve");
    t.line("");
    t.line(format!("Migration name: {migration}"));
    t.line("");
    t.line("Database error code: 42701");
    t.line("");
    t.line("Database error:");
    t.line(format!(
        "ERROR: column \"{field}\" of relation \"{table}\" already exists"
    ));
    t.line("");
    t.line(format!(
        "DbError {{ severity: \"ERROR\", parsed_severity: Some(Error), code: SqlState(E42701), message: \"column \\\"{field}\\\" of relation \\\"{table}\\\" already exists\", detail: None, hint: None, position: None, where_: None, schema: None, table: None, column: None, datatype: None, constraint: None, file: Some(\"tablecmds.c\"), line: Some({}), routine: Some(\"check_for_column_name_collision\") }}",
        g.int(7000, 7400)
    ));
    Out::plain(t)
}

fn s3_access_denied(g: &mut Gen) -> Out {
    let bucket = format!(
        "acme-{}-{}",
        g.pick(&["prod", "staging", "preview"]),
        g.pick(&["assets", "artifacts", "exports"])
    );
    let prefix = g.pick(&["releases", "static", "builds"]);
    let role = g.pick(&["github-actions-deploy", "ci-runner", "agent-sandbox"]);
    let account = g.int(100_000_000_000, 999_999_999_999);
    let mut t = Text::default();
    t.line(command_failed(
        &format!("aws s3 sync dist/ s3://{bucket}/{prefix}/ --delete"),
        1,
    ));
    let files = g.int(1, 6);
    for i in 0..files {
        if g.chance(40) {
            t.line(format!(
                "Completed {}.{} KiB/{}.{} KiB ({}.{} KiB/s) with {} file(s) remaining",
                g.int(1, 900),
                g.int(0, 9),
                g.int(900, 9000),
                g.int(0, 9),
                g.int(10, 900),
                g.int(0, 9),
                files - i
            ));
        }
        let file = format!(
            "assets/{}-{}.{}",
            g.pick(&["index", "vendor", "app", "styles"]),
            g.hex(8),
            g.pick(&["js", "css", "map"])
        );
        let reason = if g.chance(50) {
            "Access Denied".to_string()
        } else {
            format!(
                "User: arn:aws:sts::{account}:assumed-role/{role}/{} is not authorized to perform: s3:PutObject on resource: \"arn:aws:s3:::{bucket}/{prefix}/{file}\" because no identity-based policy allows the s3:PutObject action",
                g.session()
            )
        };
        t.line(format!(
            "upload failed: dist/{file} to s3://{bucket}/{prefix}/{file} An error occurred (AccessDenied) when calling the PutObject operation: {reason}"
        ));
    }
    Out::plain(t)
}

fn node_eaddrinuse(g: &mut Gen) -> Out {
    let port = g.pick(&[3000, 4000, 5173, 8080]);
    let (command, script) = g.pick(&[
        ("npm run dev", "dev"),
        ("npm start", "start"),
        ("npm run start:prod", "start:prod"),
    ]);
    let mut t = Text::default();
    t.line(command_failed(command, 1));
    t.line("");
    t.line(format!("> {}@{} {script}", g.pick(JS_APPS), g.version()));
    t.line("> node dist/server.js");
    t.line("");
    g.app_logs(&mut t, 0, 4);
    t.line(format!("node:events:{}", g.pick(&[495, 496, 497])));
    t.line("      throw er; // Unhandled 'error' event");
    t.line("      ^");
    t.line("");
    t.line(format!(
        "Error: listen EADDRINUSE: address already in use :::{port}"
    ));
    t.line(format!(
        "    at Server.setupListenHandle [as _listen2] (node:net:{}:16)",
        g.int(1800, 1950)
    ));
    t.line(format!(
        "    at listenInCluster (node:net:{}:12)",
        g.int(1950, 2000)
    ));
    t.line(format!(
        "    at Server.listen (node:net:{}:7)",
        g.int(2050, 2100)
    ));
    t.line("    at startServer (/app/dist/server.js:42:10)");
    t.line("    at Object.<anonymous> (/app/dist/server.js:88:1)");
    t.line("Emitted 'error' event on Server instance at:");
    t.line(format!(
        "    at emitErrorNT (node:net:{}:8)",
        g.int(1900, 1950)
    ));
    t.line(format!(
        "    at process.processTicksAndRejections (node:internal/process/task_queues:{}:21) {{",
        g.int(80, 90)
    ));
    t.line("  code: 'EADDRINUSE',");
    t.line("  errno: -98,");
    t.line("  syscall: 'listen',");
    t.line("  address: '::',");
    t.line(format!("  port: {port}"));
    t.line("}");
    t.line("");
    t.line(format!("Node.js {}", node_version(g)));
    Out::plain(t)
}

// ---------------------------------------------------------------------------
// Second fresh set: written by someone who had not seen the miner's rules,
// and never looked at while tuning (see `fresh2`)

/// `ms` since the Unix epoch as kubectl and HTTP headers print it:
/// `Tue, 14 Oct 2025 10:02:11 +0000`.
fn rfc1123(ms: u64) -> String {
    // 1970-01-01 was a Thursday.
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let iso = rfc3339(ms);
    let month: usize = iso[5..7].parse().unwrap_or(1);
    format!(
        "{}, {} {} {} {} +0000",
        DAYS[(ms / 86_400_000 % 7) as usize],
        &iso[8..10],
        MONTHS[month - 1],
        &iso[0..4],
        &iso[11..19]
    )
}

/// A traceback frame in frozen (built-in) code: Python shows no source
/// line for it.
fn py_frozen_frame(t: &mut Text, line: u64, func: &str) {
    t.line(format!("  File \"<frozen runpy>\", line {line}, in {func}"));
}

/// Python logging's default time, `2025-10-14 10:02:11,123`, a little
/// after the previous timestamp.
fn py_log_time(g: &mut Gen) -> String {
    let ts = g.timestamp();
    format!("{} {},{}", &ts[0..10], &ts[11..19], &ts[20..23])
}

/// Characters Kubernetes uses in generated name suffixes (no vowels, no
/// look-alikes).
fn k8s_suffix(g: &mut Gen, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..len).map(|_| char::from(g.pick(ALPHABET))).collect()
}

/// A repeated event's age as kubectl shows it: `2m (x5 over 6m)` or
/// `12s (x20 over 4m)`.
fn k8s_age(g: &mut Gen) -> String {
    let over = g.int(2, 30);
    let last = if g.chance(40) {
        format!("{}s", g.int(2, 59))
    } else {
        format!("{}m", g.int(1, over))
    };
    format!("{last} (x{} over {over}m)", g.int(2, 40))
}

/// The workload both Kubernetes families are about: the orders worker,
/// whose pods crash-loop for one of two causes.
const K8S_APP: &str = "orders-worker";

/// A deploy that waited for the orders worker and gave up, then the pod
/// description (and, often, the previous container's last log lines) the
/// deploy script prints on failure. `oom`: the container exceeded its
/// memory limit (OOMKilled, exit code 137); otherwise the kubelet killed it
/// for failing its liveness probe (SIGTERM, exit code 143). Two causes and
/// two fixes (raise the limit, or fix the probe or the slow health check),
/// in nearly the same text: the events that would tell are not always
/// still listed.
fn k8s_crashloop(g: &mut Gen, oom: bool) -> Out {
    let namespace = match g.below(3) {
        0 => "staging".to_string(),
        1 => "production".to_string(),
        _ => format!("preview-{}-{}", g.pick(NOUNS), g.int(100, 999)),
    };
    let template = k8s_suffix(g, 10);
    let pod = format!("{K8S_APP}-{template}-{}", k8s_suffix(g, 5));
    let sha = g.hex(7);
    let image = format!("ghcr.io/acme/{K8S_APP}:sha-{sha}");
    let replicas = g.int(2, 6);
    let mut t = Text::default();
    match g.below(3) {
        0 => {
            t.line(command_failed(
                &format!("./scripts/deploy.sh {namespace}"),
                1,
            ));
            t.line(format!("deployment.apps/{K8S_APP} image updated"));
            for _ in 0..g.int(1, 5) {
                let line = format!(
                    "Waiting for deployment \"{K8S_APP}\" rollout to finish: {} of {replicas} updated replicas are available...",
                    g.int(0, replicas - 1)
                );
                t.line(line);
            }
            t.line(format!(
                "error: deployment \"{K8S_APP}\" exceeded its progress deadline"
            ));
        }
        1 => {
            t.line(command_failed(
                &format!(
                    "helm upgrade --install {K8S_APP} charts/{K8S_APP} -n {namespace} --set image.tag=sha-{sha} --wait --timeout {}m",
                    g.pick(&[5, 10])
                ),
                1,
            ));
            t.line("Error: UPGRADE FAILED: context deadline exceeded");
        }
        _ => {
            t.line(command_failed(
                &format!(
                    "kubectl -n {namespace} wait --for=condition=Available deployment/{K8S_APP} --timeout={}s",
                    g.pick(&[180, 300, 600])
                ),
                1,
            ));
            t.line(format!(
                "error: timed out waiting for the condition on deployments/{K8S_APP}"
            ));
        }
    }
    t.line("");
    t.line(format!("--- kubectl describe pod {pod} -n {namespace} ---"));
    let node_ip = format!("10.0.{}.{}", g.int(0, 15), g.int(2, 254));
    let node = if g.chance(50) {
        format!("ip-{}.ec2.internal", node_ip.replace('.', "-"))
    } else {
        format!(
            "gke-acme-{}-pool-{}-{}",
            g.pick(&["prod", "stg"]),
            g.hex(8),
            k8s_suffix(g, 4)
        )
    };
    let pod_ip = format!("10.{}.{}.{}", g.int(32, 63), g.int(0, 255), g.int(2, 254));
    let started = rfc1123(g.clock);
    t.line(format!("Name:             {pod}"));
    t.line(format!("Namespace:        {namespace}"));
    t.line("Priority:         0");
    t.line(format!("Service Account:  {K8S_APP}"));
    t.line(format!("Node:             {node}/{node_ip}"));
    t.line(format!("Start Time:       {started}"));
    t.line(format!(
        "Labels:           app.kubernetes.io/name={K8S_APP}"
    ));
    t.line(format!("                  pod-template-hash={template}"));
    t.line("Status:           Running");
    t.line(format!("IP:               {pod_ip}"));
    t.line("Containers:");
    t.line("  worker:");
    t.line(format!("    Container ID:   containerd://{}", g.hex(64)));
    t.line(format!("    Image:          {image}"));
    t.line(format!(
        "    Image ID:       ghcr.io/acme/{K8S_APP}@sha256:{}",
        g.hex(64)
    ));
    t.line("    Port:           8080/TCP");
    let running = g.chance(30);
    g.clock += g.int(60_000, 600_000);
    let last_started = rfc1123(g.clock);
    g.clock += g.int(2_000, 90_000);
    let last_finished = rfc1123(g.clock);
    if running {
        t.line("    State:          Running");
        g.clock += g.int(10_000, 300_000);
        t.line(format!("      Started:      {}", rfc1123(g.clock)));
    } else {
        t.line("    State:          Waiting");
        t.line("      Reason:       CrashLoopBackOff");
    }
    let (reason, code) = if oom {
        ("OOMKilled", 137)
    } else {
        ("Error", 143)
    };
    t.line("    Last State:     Terminated");
    t.line(format!("      Reason:       {reason}"));
    t.line(format!("      Exit Code:    {code}"));
    t.line(format!("      Started:      {last_started}"));
    t.line(format!("      Finished:     {last_finished}"));
    t.line("    Ready:          False");
    let restarts = g.int(1, 40);
    t.line(format!("    Restart Count:  {restarts}"));
    t.line("    Limits:");
    t.line("      cpu:     500m");
    t.line("      memory:  512Mi");
    t.line("    Requests:");
    t.line("      cpu:        250m");
    t.line("      memory:     256Mi");
    t.line("    Liveness:     http-get http://:8080/healthz delay=10s timeout=1s period=10s #success=1 #failure=3");
    t.line("    Readiness:    http-get http://:8080/ready delay=5s timeout=1s period=5s #success=1 #failure=3");
    t.line("    Environment:");
    t.line(format!("      QUEUE:      {}", g.pick(QUEUES)));
    t.line(format!("      RELEASE:    sha-{sha}"));
    t.line("Conditions:");
    t.line("  Type              Status");
    t.line("  Initialized       True");
    t.line("  Ready             False");
    t.line("  ContainersReady   False");
    t.line("  PodScheduled      True");
    t.line("Events:");
    t.line("  Type     Reason     Age                 From               Message");
    t.line("  ----     ------     ----                ----               -------");
    let uid = g.uuid();
    let mut events: Vec<(&str, &str, String, &str, String)> = Vec::new();
    if g.chance(40) {
        events.push((
            "Normal",
            "Scheduled",
            format!("{}m", g.int(31, 90)),
            "default-scheduler",
            format!("Successfully assigned {namespace}/{pod} to {node}"),
        ));
    }
    if g.chance(70) {
        events.push((
            "Normal",
            "Pulled",
            k8s_age(g),
            "kubelet",
            format!("Container image \"{image}\" already present on machine"),
        ));
    }
    if g.chance(50) {
        events.push((
            "Normal",
            "Created",
            k8s_age(g),
            "kubelet",
            "Created container: worker".to_string(),
        ));
        events.push((
            "Normal",
            "Started",
            k8s_age(g),
            "kubelet",
            "Started container worker".to_string(),
        ));
    }
    if !oom {
        if g.chance(70) {
            let failure = g.pick(&[
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                "dial tcp {ip}:8080: connect: connection refused",
                "HTTP probe failed with statuscode: 503",
            ]);
            let failure = failure.replace("{ip}", &pod_ip);
            let message = if failure.starts_with("HTTP") {
                format!("Liveness probe failed: {failure}")
            } else {
                format!("Liveness probe failed: Get \"http://{pod_ip}:8080/healthz\": {failure}")
            };
            events.push(("Warning", "Unhealthy", k8s_age(g), "kubelet", message));
        }
        if g.chance(60) {
            events.push((
                "Normal",
                "Killing",
                k8s_age(g),
                "kubelet",
                "Container worker failed liveness probe, will be restarted".to_string(),
            ));
        }
    }
    events.push((
        "Warning",
        "BackOff",
        k8s_age(g),
        "kubelet",
        format!("Back-off restarting failed container worker in pod {pod}_{namespace}({uid})"),
    ));
    for (kind, reason, age, from, message) in events {
        t.line(format!(
            "  {kind:<8} {reason:<10} {age:<19} {from:<18} {message}"
        ));
    }
    // The previous container's last lines: the worker's own log, cut off
    // wherever it died.
    if g.chance(60) {
        t.line("");
        t.line(format!(
            "--- kubectl logs {pod} -n {namespace} --previous --tail=20 ---"
        ));
        g.app_logs(&mut t, 1, 12);
        if !oom && g.chance(50) {
            let ts = g.timestamp();
            t.line(format!("{ts} INFO  worker: received SIGTERM, draining"));
        }
    }
    Out::plain(t)
}

/// `go test` in the billing module, where `splitLines` indexes one past
/// the end of a slice when an invoice has as many lines as periods. Every
/// test that reaches it panics there; the test, its caller in between and
/// the index vary. One off-by-one, one fix.
fn go_test_panic_index(g: &mut Gen) -> Out {
    const CALLERS: &[(&str, &str, u32)] = &[
        ("(*Invoice).Prorate", "prorate.go", 31),
        ("(*Invoice).ApplyCredit", "credit.go", 77),
        ("Rebalance", "rebalance.go", 112),
        ("(*Invoice).Finalize", "invoice.go", 204),
    ];
    let module = "github.com/acme/billing";
    let go = g.pick(&["1.22.8", "1.23.2", "1.23.4"]);
    let new_testing = !go.starts_with("1.22");
    let (tl1, tl2, trun, tstart) = if new_testing {
        (1632, 1635, 1690, 1743)
    } else {
        (1631, 1634, 1689, 1742)
    };
    let root = g.pick(&[
        "/home/runner/work/billing/billing",
        "/app",
        "/builds/acme/billing",
    ]);
    let goroot = if root == "/home/runner/work/billing/billing" {
        format!("/opt/hostedtoolcache/go/{go}/x64")
    } else {
        "/usr/local/go".to_string()
    };
    let command = g.pick(&[
        "go test ./...",
        "go test -count=1 ./...",
        "go test -v ./internal/...",
        "make test",
    ]);
    let verbose = command.contains("-v");
    let make = command.starts_with("make");
    let mut t = Text::default();
    t.line(command_failed(command, if make { 2 } else { 1 }));
    if make {
        t.line("go test -race -count=1 ./...");
    }
    for _ in 0..g.int(0, 4) {
        let line = format!(
            "ok  \t{module}/internal/{}\t{}s",
            g.pick(&["ledger", "tax", "currency", "webhook", "store"]),
            g.seconds(2)
        );
        t.line(line);
    }
    if g.chance(30) {
        t.line(format!("?   \t{module}/cmd/billing\t[no test files]"));
    }
    let test = format!("Test{}", g.pascal());
    if verbose {
        for _ in 0..g.int(0, 6) {
            let other = format!("Test{}", g.pascal());
            t.line(format!("=== RUN   {other}"));
            t.line(format!("--- PASS: {other} (0.00s)"));
        }
        t.line(format!("=== RUN   {test}"));
    }
    let subtest = g.chance(50).then(|| format!("{test}/{}", g.snake()));
    if let Some(sub) = &subtest {
        if verbose {
            t.line(format!("=== RUN   {sub}"));
        }
    }
    t.line(format!("--- FAIL: {test} (0.0{}s)", g.int(0, 9)));
    if let Some(sub) = &subtest {
        t.line(format!("    --- FAIL: {sub} (0.00s)"));
    }
    let length = g.int(0, 6);
    let panic = format!(
        "panic: runtime error: index out of range [{}] with length {length}",
        length + g.int(0, 1)
    );
    t.line(format!("{panic} [recovered]"));
    t.line(format!("\t{panic}"));
    t.line("");
    let goroutine = g.int(6, 90);
    t.line(format!("goroutine {goroutine} [running]:"));
    let addr = |g: &mut Gen| format!("0xc000{}", g.hex(6));
    t.line(format!(
        "testing.tRunner.func1.2({{0x{}, {}}})",
        g.hex(6),
        addr(g)
    ));
    // The runtime's own frames have fixed offsets per Go release; the
    // application's change from build to build.
    t.line(format!("\t{goroot}/src/testing/testing.go:{tl1} +0x230"));
    t.line("testing.tRunner.func1()");
    t.line(format!("\t{goroot}/src/testing/testing.go:{tl2} +0x35e"));
    t.line(format!("panic({{0x{}?, {}?}})", g.hex(6), addr(g)));
    t.line(format!(
        "\t{goroot}/src/runtime/panic.go:{} +0x132",
        if new_testing { 785 } else { 770 }
    ));
    t.line(format!(
        "{module}/internal/invoice.splitLines({{{}, 0x{:x}, 0x{:x}}}, 0x{:x})",
        addr(g),
        length,
        length + g.int(0, 4),
        g.int(1, 12)
    ));
    t.line(format!(
        "\t{root}/internal/invoice/split.go:57 +0x{:x}",
        g.pick(&[0x1d4, 0x1f0, 0x21c])
    ));
    let (caller, file, line) = g.pick(CALLERS);
    t.line(format!("{module}/internal/invoice.{caller}(...)"));
    t.line(format!("\t{root}/internal/invoice/{file}:{line}"));
    let test_file = format!(
        "{}_test.go",
        g.pick(&["invoice", "split", "credit", "prorate"])
    );
    let closure = if subtest.is_some() { ".func1" } else { "" };
    t.line(format!(
        "{module}/internal/invoice.{test}{closure}({})",
        addr(g)
    ));
    t.line(format!(
        "\t{root}/internal/invoice/{test_file}:{} +0x{:x}",
        g.int(12, 400),
        g.int(0x20, 0xff)
    ));
    t.line(format!("testing.tRunner({}, 0x{})", addr(g), g.hex(6)));
    t.line(format!("\t{goroot}/src/testing/testing.go:{trun} +0xf4"));
    t.line(format!(
        "created by testing.(*T).Run in goroutine {}",
        goroutine - 1
    ));
    t.line(format!("\t{goroot}/src/testing/testing.go:{tstart} +0x390"));
    t.line(format!(
        "FAIL\t{module}/internal/invoice\t0.0{}s",
        g.int(10, 99)
    ));
    if g.chance(40) {
        let line = format!(
            "ok  \t{module}/internal/{}\t{}s",
            g.pick(&["report", "export", "sync"]),
            g.seconds(3)
        );
        t.line(line);
    }
    t.line("FAIL");
    if make {
        t.line(format!(
            "make: *** [Makefile:{}: test] Error 1",
            g.int(8, 60)
        ));
    }
    Out::plain(t)
}

/// javac through Gradle: an agent renamed `OrderRepository.findByCustomer`
/// and left its callers alone. The callers that fail, how many, and the
/// tasks around them vary; the missing method is one, and so is the fix.
fn gradle_cannot_find_symbol(g: &mut Gen) -> Out {
    const CALLERS: &[(&str, &str, &str)] = &[
        ("service", "OrderService", "orderRepository"),
        ("service", "InvoiceService", "orders"),
        ("web", "CustomerController", "orderRepository"),
        ("jobs", "ReconcileOrdersJob", "repository"),
        ("report", "CustomerReport", "orderRepo"),
    ];
    let root = g.pick(&[
        "/home/runner/work/orders/orders",
        "/builds/acme/orders",
        "/workspace/orders",
    ]);
    let mut t = Text::default();
    t.line(command_failed(
        g.pick(&[
            "./gradlew build",
            "./gradlew test",
            "./gradlew :app:bootJar",
            "./gradlew check --console=plain",
        ]),
        1,
    ));
    if g.chance(30) {
        t.line("Starting a Gradle Daemon (subsequent builds will be faster)");
    }
    let upstream = [
        "> Task :buildSrc:compileKotlin UP-TO-DATE",
        "> Task :core:compileJava UP-TO-DATE",
        "> Task :core:processResources NO-SOURCE",
        "> Task :core:classes UP-TO-DATE",
        "> Task :core:jar UP-TO-DATE",
        "> Task :app:processResources",
        "> Task :app:generateEffectiveLombokConfig",
    ];
    for task in upstream {
        if g.chance(55) {
            t.line(task);
        }
    }
    if g.chance(40) {
        t.line(
            "warning: [options] source value 8 is obsolete and will be removed in a future release",
        );
    }
    t.line(g.paint("31", "> Task :app:compileJava FAILED"));
    let mut callers = CALLERS.to_vec();
    g.shuffle(&mut callers);
    let errors = g.int(1, 4) as usize;
    for (package, class, var) in &callers[..errors] {
        let line = g.int(20, 300);
        t.line(format!(
            "{root}/app/src/main/java/com/acme/orders/{package}/{class}.java:{line}: error: cannot find symbol"
        ));
        let target = g.pick(&["customerId", "customer.getId()", "request.customerId()"]);
        let code = format!("        List<Order> orders = {var}.findByCustomer({target});");
        let caret = code.find(".findByCustomer").unwrap_or(0);
        t.line(&code);
        t.line(format!("{}^", " ".repeat(caret)));
        t.line("  symbol:   method findByCustomer(Long)");
        t.line(format!(
            "  location: variable {var} of type OrderRepository"
        ));
    }
    if g.chance(30) {
        t.line("Note: Some input files use unchecked or unsafe operations.");
        t.line("Note: Recompile with -Xlint:unchecked for details.");
    }
    t.line(format!(
        "{errors} error{}",
        if errors == 1 { "" } else { "s" }
    ));
    t.line("");
    t.line(g.paint("31", "FAILURE: Build failed with an exception."));
    t.line("");
    t.line("* What went wrong:");
    t.line("Execution failed for task ':app:compileJava'.");
    t.line("> Compilation failed; see the compiler error output for details.");
    t.line("");
    t.line("* Try:");
    t.line("> Run with --info option to get more log output.");
    t.line("> Run with --scan to get full insights.");
    t.line("> Get more help at https://help.gradle.org.");
    t.line("");
    if g.chance(40) {
        t.line("Deprecated Gradle features were used in this build, making it incompatible with Gradle 9.0.");
        t.line("");
    }
    let failed = format!("BUILD FAILED in {}s", g.int(4, 180));
    t.line(g.paint("31", &failed));
    let executed = g.int(1, 9);
    t.line(format!(
        "{} actionable tasks: {executed} executed, {} up-to-date",
        executed + 3,
        3
    ));
    Out::plain(t)
}

/// A Kotlin service syncing partner feeds: partners send `"sku": null`
/// for bundles, and the `FeedItem` model declares `sku` non-null. The
/// partner, page, offset and item vary; the fix (a nullable `sku`) is one.
/// Spring's log lines in the message, the exception with its `Caused by:`
/// chain as the stack trace.
fn kotlin_feed_null(g: &mut Gen) -> Out {
    let partner = g.pick(&[
        "northwind",
        "globex",
        "initech",
        "umbrella",
        "hooli",
        "vandelay",
    ]);
    let page = g.int(1, 400);
    let item = g.int(0, 199);
    let offset = g.int(200, 90_000);
    let worker = g.int(1, 8);
    // Spring's default layout: the thread cut to its last 15 characters,
    // the logger padded to 40.
    let spring_line = |g: &mut Gen, level: &str, thread: &str, logger: &str, text: &str| {
        let thread = &thread[thread.len().saturating_sub(15)..];
        format!(
            "{} {level:>5} 1 --- [{thread:>15}] {logger:<40} : {text}",
            g.timestamp()
        )
    };
    let mut t = Text::default();
    let first = page.saturating_sub(g.int(0, 5)).max(1);
    let line = spring_line(
        g,
        "INFO",
        "scheduling-1",
        "c.a.sync.FeedSyncJob",
        &format!("Syncing feed '{partner}' from page {first}"),
    );
    t.line(line);
    for p in first..page {
        let text = format!(
            "Fetched page {p} ({} items) in {} ms",
            g.int(50, 200),
            g.int(40, 2000)
        );
        let line = spring_line(
            g,
            "INFO",
            "DefaultDispatcher-worker-1",
            "c.a.sync.PartnerFeedClient",
            &text,
        );
        t.line(line);
        if g.chance(30) {
            let text = format!("Upserted {} items into catalog", g.int(50, 200));
            let line = spring_line(
                g,
                "DEBUG",
                "DefaultDispatcher-worker-2",
                "c.a.sync.CatalogWriter",
                &text,
            );
            t.line(line);
        }
    }
    let thread = format!("DefaultDispatcher-worker-{worker}");
    let line = spring_line(
        g,
        "ERROR",
        &thread,
        "c.a.sync.FeedSyncJob",
        &format!("Feed sync '{partner}' aborted"),
    );
    t.line(line);
    let outer =
        format!("com.acme.sync.FeedSyncException: Failed to sync page {page} of feed '{partner}'");
    let cause = format!(
        "kotlinx.serialization.json.internal.JsonDecodingException: Unexpected JSON token at offset {offset}: Expected string literal but 'null' literal was found at path: $.items[{item}].sku"
    );
    t.line(&outer);
    t.line(format!("Caused by: {cause}"));

    let mut trace = Text::default();
    trace.line(&outer);
    trace.line("\tat com.acme.sync.FeedSyncJob.syncPage(FeedSyncJob.kt:88)");
    trace.line("\tat com.acme.sync.FeedSyncJob.access$syncPage(FeedSyncJob.kt:24)");
    trace.line("\tat com.acme.sync.FeedSyncJob$run$1.invokeSuspend(FeedSyncJob.kt:41)");
    trace.line("\tat kotlin.coroutines.jvm.internal.BaseContinuationImpl.resumeWith(ContinuationImpl.kt:33)");
    let coroutines = g.pick(&[(108, 584, 793, 697, 684), (104, 585, 802, 706, 693)]);
    trace.line(format!(
        "\tat kotlinx.coroutines.DispatchedTask.run(DispatchedTask.kt:{})",
        coroutines.0
    ));
    if g.chance(60) {
        trace.line(format!(
            "\tat kotlinx.coroutines.scheduling.CoroutineScheduler.runSafely(CoroutineScheduler.kt:{})",
            coroutines.1
        ));
        trace.line(format!(
            "\tat kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.executeTask(CoroutineScheduler.kt:{})",
            coroutines.2
        ));
        trace.line(format!(
            "\tat kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.runWorker(CoroutineScheduler.kt:{})",
            coroutines.3
        ));
        trace.line(format!(
            "\tat kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.run(CoroutineScheduler.kt:{})",
            coroutines.4
        ));
    }
    trace.line(format!("Caused by: {cause}"));
    trace.line("Use 'coerceInputValues = true' in 'Json {}' builder to coerce nulls if property has a default value.");
    // The excerpt of the document around the offset.
    let excerpt = format!(
        ".....\"qty\":{},\"title\":\"{} {}\",\"bundle\":true,\"sku\":null,\"price\":{{\"amount\":{},\"currency\":\"{}\"}},\"upd.....",
        g.int(1, 40),
        capitalise(g.pick(NOUNS)),
        g.pick(&["Pack", "Bundle", "Set", "Kit"]),
        g.int(100, 99_999),
        g.pick(&["USD", "EUR", "GBP"])
    );
    trace.line(format!("JSON input: {excerpt}"));
    trace.line("\tat kotlinx.serialization.json.internal.JsonExceptionsKt.JsonDecodingException(JsonExceptions.kt:24)");
    trace.line(
        "\tat kotlinx.serialization.json.internal.AbstractJsonLexer.fail(AbstractJsonLexer.kt:598)",
    );
    trace.line("\tat kotlinx.serialization.json.internal.AbstractJsonLexer.consumeStringLenient(AbstractJsonLexer.kt:381)");
    trace.line("\tat kotlinx.serialization.json.internal.StreamingJsonDecoder.decodeString(StreamingJsonDecoder.kt:339)");
    trace.line("\tat com.acme.sync.model.FeedItem$$serializer.deserialize(FeedItem.kt:11)");
    trace.line("\tat com.acme.sync.model.FeedItem$$serializer.deserialize(FeedItem.kt:11)");
    trace.line("\tat kotlinx.serialization.internal.CollectionLikeSerializer.readElement(CollectionSerializers.kt:80)");
    trace.line("\tat com.acme.sync.model.FeedPage$$serializer.deserialize(FeedPage.kt:8)");
    trace.line("\tat kotlinx.serialization.json.Json.decodeFromString(Json.kt:107)");
    trace.line("\tat com.acme.sync.PartnerFeedClient.parsePage(PartnerFeedClient.kt:63)");
    trace.line("\tat com.acme.sync.FeedSyncJob.syncPage(FeedSyncJob.kt:80)");
    trace.line(format!("\t... {} more", g.pick(&[8, 9, 12])));
    Out::traced(t, trace)
}

/// The ledger job's transfer, where two database errors surface from one
/// function a few lines apart. `deadlock`: two transfers lock the same two
/// accounts in opposite order (fix: lock in id order). Otherwise: a retried
/// transfer inserts its ledger entry again (fix: make the insert
/// idempotent). psycopg's multi-line errors, with DETAIL lines whose
/// numbers vary.
fn pg_ledger(g: &mut Gen, deadlock: bool) -> Out {
    let py = python_version(g);
    let site_packages = format!("/usr/local/lib/python{py}/site-packages");
    let batch = g.int(1, 9999);
    let command = match g.below(3) {
        0 => format!("python -m app.jobs.post_transfers --batch {batch}"),
        1 => format!("uv run python -m app.jobs.post_transfers --batch {batch}"),
        _ => "python -m app.jobs.post_transfers --pending".to_string(),
    };
    let transfer = format!("tr_{}", g.hex(12));
    let mut t = Text::default();
    t.line(command_failed(&command, 1));
    for _ in 0..g.int(0, 7) {
        let line = format!(
            "{} INFO app.ledger: posting transfer tr_{} ({}.{:02} {}) from acct_{} to acct_{}",
            py_log_time(g),
            g.hex(12),
            g.int(1, 90_000),
            g.int(0, 99),
            g.pick(&["USD", "EUR", "GBP"]),
            g.int(1000, 99_999),
            g.int(1000, 99_999)
        );
        t.line(line);
    }
    let line = format!(
        "{} ERROR app.ledger: transfer {transfer} failed, rolling back",
        py_log_time(g)
    );
    t.line(line);
    let mut exception = Text::default();
    if deadlock {
        let (a, b) = (g.int(1000, 65_000), g.int(1000, 65_000));
        let tx = g.int(1_000_000, 99_000_000);
        exception.line("psycopg.errors.DeadlockDetected: deadlock detected");
        exception.line(format!(
            "DETAIL:  Process {a} waits for ShareLock on transaction {}; blocked by process {b}.",
            tx + g.int(1, 9)
        ));
        exception.line(format!(
            "Process {b} waits for ShareLock on transaction {tx}; blocked by process {a}."
        ));
        exception.line("HINT:  See server log for query details.");
        exception.line(format!(
            "CONTEXT:  while updating tuple ({},{}) in relation \"accounts\"",
            g.int(0, 9000),
            g.int(1, 60)
        ));
    } else {
        exception.line("psycopg.errors.UniqueViolation: duplicate key value violates unique constraint \"ledger_entries_idempotency_key_key\"");
        exception.line(format!(
            "DETAIL:  Key (idempotency_key)=({transfer}:{}) already exists.",
            g.pick(&["debit", "credit"])
        ));
    }
    let exception = exception.finish();
    t.line(&exception);
    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    py_frozen_frame(&mut trace, 198, "_run_module_as_main");
    py_frozen_frame(&mut trace, 88, "_run_code");
    py_frame(
        &mut trace,
        "/app/app/jobs/post_transfers.py",
        44,
        "<module>",
        "sys.exit(main())",
    );
    py_frame(
        &mut trace,
        "/app/app/jobs/post_transfers.py",
        37,
        "main",
        "post_transfer(conn, transfer)",
    );
    if deadlock {
        py_frame(
            &mut trace,
            "/app/app/ledger/post.py",
            64,
            "post_transfer",
            "cur.execute(DEBIT_ACCOUNT, (transfer.amount, transfer.source_id))",
        );
    } else {
        py_frame(
            &mut trace,
            "/app/app/ledger/post.py",
            58,
            "post_transfer",
            "cur.execute(INSERT_ENTRY, entry.as_row())",
        );
    }
    let cursor_line = g.pick(&[97, 97, 732]);
    py_frame(
        &mut trace,
        &format!("{site_packages}/psycopg/cursor.py"),
        cursor_line,
        "execute",
        "raise ex.with_traceback(None)",
    );
    trace.line(&exception);
    Out::traced(t, trace)
}

/// The agent harness calling Anthropic's API through the Python SDK at one
/// call site, the SDK's retries logged by httpx. `overloaded`: the API
/// answered 529 (the provider is out of capacity: wait and retry later);
/// otherwise 429 (our organisation's rate limit: throttle the agents).
/// Same frames, same retry lines, the body's JSON as a Python dict.
fn anthropic_sdk(g: &mut Gen, overloaded: bool) -> Out {
    let py = python_version(g);
    let site_packages = format!("/usr/local/lib/python{py}/site-packages");
    let step = g.pick(&["plan", "summarize", "review", "triage", "fix"]);
    let model = g.pick(&[
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1",
        "claude-haiku-4-5",
    ]);
    let item = g.int(1, 99_999);
    let body = if overloaded {
        format!(
            "{{'type': 'error', 'error': {{'type': 'overloaded_error', 'message': 'Overloaded'}}, 'request_id': '{}'}}",
            request_id(g)
        )
    } else {
        let (limit, unit) = g.pick(&[
            ("80,000", "input tokens per minute"),
            ("400,000", "input tokens per minute"),
            ("2,000,000", "input tokens per minute"),
            ("16,000", "output tokens per minute"),
            ("4,000", "requests per minute"),
        ]);
        format!(
            "{{'type': 'error', 'error': {{'type': 'rate_limit_error', 'message': 'This request would exceed the rate limit for your organization ({}) of {limit} {unit}. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.'}}, 'request_id': '{}'}}",
            g.uuid(),
            request_id(g)
        )
    };
    let (status, class) = if overloaded {
        ("529 ", "anthropic.InternalServerError: Error code: 529")
    } else {
        (
            "429 Too Many Requests",
            "anthropic.RateLimitError: Error code: 429",
        )
    };
    let exception = format!("{class} - {body}");
    let mut t = Text::default();
    t.line(format!(
        "Agent run {} failed in step '{step}': {exception}",
        g.session()
    ));
    let line = format!(
        "{} INFO app.agent: step '{step}' item={item} model={model} input_tokens={}",
        py_log_time(g),
        g.int(2_000, 180_000)
    );
    t.line(line);
    let retries = g.pick(&[0, 2, 2, 2, 5]);
    for attempt in 0..=retries {
        let line = format!(
            "{} INFO httpx: HTTP Request: POST https://api.anthropic.com/v1/messages \"HTTP/1.1 {status}\"",
            py_log_time(g)
        );
        t.line(line);
        if attempt < retries {
            let wait = if !overloaded && g.chance(50) {
                format!("{}.000000", g.int(1, 60))
            } else {
                format!("0.{:06}", g.int(400_000, 999_999))
            };
            let line = format!(
                "{} INFO anthropic._base_client: Retrying request to /v1/messages in {wait} seconds",
                py_log_time(g)
            );
            t.line(line);
        }
    }
    let sdk = g.pick(&[(283, 930, 1326, 1114), (275, 1021, 1361, 1151)]);
    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    py_frame(
        &mut trace,
        "/app/app/agent/runner.py",
        142,
        "run_step",
        "result = step.run(ctx)",
    );
    py_frame(
        &mut trace,
        &format!("/app/app/agent/steps/{step}.py"),
        g.pick(&[33, 48, 61]),
        "run",
        "reply = ctx.llm.complete(messages, tools=self.tools)",
    );
    py_frame(
        &mut trace,
        "/app/app/agent/llm.py",
        57,
        "complete",
        "response = self.client.messages.create(**request)",
    );
    py_frame(
        &mut trace,
        &format!("{site_packages}/anthropic/_utils/_utils.py"),
        sdk.0,
        "wrapper",
        "return func(*args, **kwargs)",
    );
    py_frame(
        &mut trace,
        &format!("{site_packages}/anthropic/resources/messages/messages.py"),
        sdk.1,
        "create",
        "return self._post(",
    );
    py_frame(
        &mut trace,
        &format!("{site_packages}/anthropic/_base_client.py"),
        sdk.2,
        "post",
        "return cast(ResponseT, self.request(cast_to, opts, stream=stream, stream_cls=stream_cls))",
    );
    py_frame(
        &mut trace,
        &format!("{site_packages}/anthropic/_base_client.py"),
        sdk.3,
        "request",
        "raise self._make_status_error_from_response(err.response) from None",
    );
    trace.line(&exception);
    Out::traced(t, trace)
}

/// The pull-request review agent (Node, the OpenAI SDK) sending a whole
/// diff in one request: large pull requests overflow the model's context
/// window. The model, its limit and the token counts vary, and so does the
/// API's wording between model generations; the fix (chunk the diff) is
/// one. Node prints the error object, headers and JSON body included.
fn openai_context_length(g: &mut Gen) -> Out {
    let (model, limit, new_wording) = g.pick(&[
        ("gpt-4o", 128_000, false),
        ("gpt-4o-2024-08-06", 128_000, false),
        ("gpt-4o-mini", 128_000, false),
        ("gpt-4.1", 1_047_576, false),
        ("gpt-5", 272_000, true),
        ("gpt-5-mini", 272_000, true),
    ]);
    let tokens = limit + g.int(1, limit / 5);
    let text = if new_wording {
        format!("Input tokens exceed the configured limit of {limit} tokens. Your messages resulted in {tokens} tokens. Please reduce the length of the messages.")
    } else if g.chance(30) {
        format!("This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens (including {} in the functions). Please reduce the length of the messages or functions.", g.int(200, 4000))
    } else {
        format!("This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages.")
    };
    let repo = g.pick(REPOS);
    let pr = g.int(1, 4000);
    let request = format!("req_{}", g.hex(32));
    let sdk = g.pick(&[(41, 295, 339), (46, 316, 361), (72, 409, 452)]);
    let mut t = Text::default();
    t.line(command_failed(
        &format!("node src/agent/review.mjs --repo {repo} --pr {pr}"),
        1,
    ));
    t.line(format!(
        "[review] {repo}#{pr}: {} files changed, +{} -{}",
        g.int(20, 900),
        g.int(2000, 90_000),
        g.int(100, 40_000)
    ));
    t.line(format!(
        "[review] model={model} max_tokens={}",
        g.pick(&[4096, 8192, 16_384])
    ));
    if g.chance(40) {
        t.line(format!(
            "[review] skipped {} generated files (package-lock.json, *.snap)",
            g.int(1, 30)
        ));
    }
    t.line(format!(
        "file:///app/node_modules/openai/error.mjs:{}",
        sdk.0
    ));
    t.line("            return new BadRequestError(status, error, message, headers);");
    t.line("                   ^");
    t.line("");
    t.line(format!("BadRequestError: 400 {text}"));
    t.line(format!(
        "    at APIError.generate (file:///app/node_modules/openai/error.mjs:{}:20)",
        sdk.0
    ));
    t.line(format!(
        "    at OpenAI.makeStatusError (file:///app/node_modules/openai/core.mjs:{}:25)",
        sdk.1
    ));
    t.line(format!(
        "    at OpenAI.makeRequest (file:///app/node_modules/openai/core.mjs:{}:30)",
        sdk.2
    ));
    t.line("    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)");
    t.line("    at async reviewPullRequest (file:///app/src/agent/review.mjs:88:20)");
    t.line("    at async main (file:///app/src/agent/review.mjs:141:3) {");
    t.line("  status: 400,");
    t.line("  headers: {");
    let mut headers = vec![
        "'access-control-expose-headers': 'X-Request-ID'".to_string(),
        "'alt-svc': 'h3=\":443\"; ma=86400'".to_string(),
        format!(
            "'cf-ray': '{}-{}'",
            g.hex(16),
            g.pick(&["IAD", "SJC", "FRA", "AMS"])
        ),
        "connection: 'keep-alive'".to_string(),
        format!("'content-length': '{}'", g.int(260, 420)),
        "'content-type': 'application/json'".to_string(),
        format!(
            "date: '{} GMT'",
            rfc1123(g.clock).trim_end_matches(" +0000")
        ),
        format!("'openai-organization': 'acme-{}'", g.hex(6)),
        format!("'openai-processing-ms': '{}'", g.int(20, 900)),
        "'openai-version': '2020-10-01'".to_string(),
        format!("'x-ratelimit-remaining-tokens': '{}'", g.int(0, 2_000_000)),
        format!("'x-request-id': '{request}'"),
    ];
    // Proxies in between add or drop some.
    headers.retain(|_| g.chance(85));
    for (i, header) in headers.iter().enumerate() {
        let comma = if i + 1 < headers.len() { "," } else { "" };
        t.line(format!("    {header}{comma}"));
    }
    t.line("  },");
    t.line(format!("  request_id: '{request}',"));
    t.line("  error: {");
    t.line(format!("    message: \"{text}\","));
    t.line("    type: 'invalid_request_error',");
    t.line("    param: 'messages',");
    t.line("    code: 'context_length_exceeded'");
    t.line("  },");
    t.line("  code: 'context_length_exceeded',");
    t.line("  param: 'messages',");
    t.line("  type: 'invalid_request_error'");
    t.line("}");
    t.line("");
    t.line(format!("Node.js {}", node_version(g)));
    Out::plain(t)
}

/// git over HTTPS with the agents' token after it expired: whatever the
/// command (clone, fetch, push, ls-remote) and repository, GitHub says the
/// credentials are bad. One fix: rotate the token.
fn git_auth_failed(g: &mut Gen) -> Out {
    let repo = g.pick(REPOS);
    let url = format!("https://github.com/{repo}.git/");
    let mut t = Text::default();
    match g.below(4) {
        0 => {
            let dir = format!(
                "/work/.prodigy/worktrees/{}/{}",
                repo.trim_start_matches("acme/"),
                g.session()
            );
            t.line(command_failed(
                &format!("git clone https://github.com/{repo}.git {dir}"),
                128,
            ));
            t.line(format!("Cloning into '{dir}'..."));
        }
        1 => {
            let base = g.pick(BASE_BRANCHES);
            t.line(command_failed(&format!("git fetch origin {base}"), 128));
        }
        2 => {
            let branch = g.branch();
            t.line(command_failed(&format!("git push -u origin {branch}"), 128));
        }
        _ => {
            t.line(command_failed(
                &format!("git ls-remote --heads {}", url.trim_end_matches('/')),
                128,
            ));
        }
    }
    if g.chance(30) {
        t.line(format!(
            "{} trace: run_command: git credential-cache get",
            &g.timestamp()[11..23]
        ));
    }
    if g.chance(60) {
        t.line("remote: Invalid username or token. Password authentication is not supported for Git operations.");
    } else {
        t.line("remote: Invalid username or password.");
    }
    t.line(format!("fatal: Authentication failed for '{url}'"));
    Out::plain(t)
}

/// Terraform creating a preview environment's asset bucket, named after
/// the branch: S3 bucket names are global, and the name is taken. The
/// branch, the apply's progress and the request ids vary; the fix (a
/// unique suffix in the bucket's name) is one. Coloured unless the command
/// asked for `-no-color`, as Terraform does.
fn terraform_bucket_exists(g: &mut Gen) -> Out {
    let slug: String = g
        .branch()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let bucket = format!("acme-preview-{}-assets", slug.trim_end_matches('-'));
    let (command, color) = match g.below(3) {
        0 => ("terraform apply -auto-approve -input=false tfplan", true),
        1 => (
            "terraform -chdir=infra/preview apply -auto-approve -no-color",
            false,
        ),
        _ => ("terraform apply -auto-approve", true),
    };
    // Terraform's own colours, in addition to the runner's.
    let saved = g.color;
    g.color = color;
    let mut t = Text::default();
    t.line(command_failed(command, 1));
    const RESOURCES: &[&str] = &[
        "module.preview.aws_iam_role.deploy",
        "module.preview.aws_cloudfront_origin_access_identity.this",
        "module.preview.aws_route53_record.www",
        "module.preview.aws_acm_certificate.this",
        "module.preview.random_id.suffix",
    ];
    let planned: Vec<&str> = RESOURCES.iter().copied().filter(|_| g.chance(60)).collect();
    // Without a saved plan, apply prints the plan first.
    if !command.ends_with("tfplan") {
        t.line("");
        t.line("Terraform used the selected providers to generate the following execution");
        t.line("plan. Resource actions are indicated with the following symbols:");
        t.line(format!("  {} create", g.paint("32", "+")));
        t.line("");
        t.line("Terraform will perform the following actions:");
        t.line("");
        t.line(g.paint(
            "1",
            "  # module.preview.aws_s3_bucket.assets will be created",
        ));
        t.line(format!(
            "  {} resource \"aws_s3_bucket\" \"assets\" {{",
            g.paint("32", "+")
        ));
        t.line(format!("      + bucket        = \"{bucket}\""));
        t.line("      + force_destroy = true");
        t.line("      + id            = (known after apply)");
        t.line("    }");
        for resource in &planned {
            t.line("");
            t.line(g.paint("1", &format!("  # {resource} will be created")));
            let (kind, name) = resource
                .trim_start_matches("module.preview.")
                .split_once('.')
                .unwrap_or((resource, ""));
            t.line(format!(
                "  {} resource \"{kind}\" \"{name}\" {{",
                g.paint("32", "+")
            ));
            t.line("      + id = (known after apply)");
            t.line("    }");
        }
        t.line("");
        t.line(format!(
            "{} {} to add, 0 to change, 0 to destroy.",
            g.paint("1", "Plan:"),
            planned.len() + 1
        ));
    }
    let mut created = Vec::new();
    for resource in planned {
        created.push(resource);
        t.line(g.paint("1", &format!("{resource}: Creating...")));
    }
    t.line(g.paint("1", "module.preview.aws_s3_bucket.assets: Creating..."));
    for resource in created {
        let id = g.hex(14).to_uppercase();
        let line = format!(
            "{resource}: Creation complete after {}s [id={id}]",
            g.int(0, 40)
        );
        t.line(g.paint("1", &line));
    }
    t.line(g.paint("31", "╷"));
    let error = format!(
        "creating S3 Bucket ({bucket}): operation error S3: CreateBucket, https response error StatusCode: 409, RequestID: {}, HostID: {}=, BucketAlreadyExists: ",
        g.hex(16).to_uppercase(),
        g.hex(56)
    );
    t.line(format!(
        "{} {}{error}",
        g.paint("31", "│"),
        g.paint("1;31", "Error: ")
    ));
    t.line(format!("{} ", g.paint("31", "│")));
    t.line(format!(
        "{}   with module.preview.aws_s3_bucket.assets,",
        g.paint("31", "│")
    ));
    t.line(format!(
        "{}   on modules/preview/storage.tf line 1, in resource \"aws_s3_bucket\" \"assets\":",
        g.paint("31", "│")
    ));
    t.line(format!(
        "{}    1: {}",
        g.paint("31", "│"),
        g.paint("4", "resource \"aws_s3_bucket\" \"assets\" {")
    ));
    t.line(format!("{} ", g.paint("31", "│")));
    t.line(g.paint("31", "╵"));
    g.color = saved;
    Out::plain(t)
}

/// pip against the company's package index (and, through the proxy, PyPI)
/// where TLS verification fails. `expired`: the index's own certificate
/// expired (fix: renew it on pypi.acme.dev); otherwise the CI image lacks
/// the company's root CA (fix: install the CA bundle), whichever host. The
/// packages, retries and Python versions vary.
fn pip_tls(g: &mut Gen, expired: bool) -> Out {
    let (host, index) = if expired {
        ("pypi.acme.dev", "/simple")
    } else {
        g.pick(&[
            ("pypi.acme.dev", "/simple"),
            ("nexus.acme.dev", "/repository/pypi-proxy/simple"),
            ("artifacts.acme.dev", "/api/pypi/pypi-remote/simple"),
            ("pypi.org", "/simple"),
        ])
    };
    let ssl_line = g.pick(&[992, 1000, 1006, 1007]);
    let reason = if expired {
        "certificate has expired"
    } else {
        "unable to get local issuer certificate"
    };
    let ssl = format!(
        "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {reason} (_ssl.c:{ssl_line})'))"
    );
    let mut packages = [PY_PINNED, PY_MODULES].concat();
    packages.sort_unstable();
    packages.dedup();
    g.shuffle(&mut packages);
    let package = packages[0];
    let wanted = g.version();
    let python = g.int(10, 12);
    let mut t = Text::default();
    let command = match g.below(3) {
        0 => "pip install -r requirements.txt".to_string(),
        1 => format!("pip install --index-url https://{host}{index} -r requirements/ci.txt"),
        _ => format!("python -m pip install {package}=={wanted}"),
    };
    t.line(command_failed(&command, 1));
    if host != "pypi.org" {
        t.line(format!("Looking in indexes: https://{host}{index}"));
    }
    // Some requirements were already in the image.
    for package in &packages[1..g.int(1, 6) as usize] {
        let line = format!(
            "Requirement already satisfied: {package} in /usr/local/lib/python3.{python}/site-packages ({})",
            g.version()
        );
        t.line(line);
    }
    let retries = g.pick(&[0, 4, 4, 4]);
    for left in (0..retries).rev() {
        t.line(format!(
            "WARNING: Retrying (Retry(total={left}, connect=None, read=None, redirect=None, status=None)) after connection broken by '{ssl}': {index}/{package}/"
        ));
    }
    t.line(format!(
        "Could not fetch URL https://{host}{index}/{package}/: There was a problem confirming the ssl certificate: HTTPSConnectionPool(host='{host}', port=443): Max retries exceeded with url: {index}/{package}/ (Caused by {ssl}) - skipping"
    ));
    t.line(format!(
        "ERROR: Could not find a version that satisfies the requirement {package}=={wanted} (from versions: none)"
    ));
    if g.chance(50) {
        t.line(format!(
            "Could not fetch URL https://{host}{index}/pip/: There was a problem confirming the ssl certificate: HTTPSConnectionPool(host='{host}', port=443): Max retries exceeded with url: {index}/pip/ (Caused by {ssl}) - skipping"
        ));
    }
    t.line(format!(
        "ERROR: No matching distribution found for {package}=={wanted}"
    ));
    Out::plain(t)
}

/// The orders API (Flask) failing at import, through whichever entry point
/// ran it: gunicorn, the worker, or pytest loading its conftest.
/// `missing`: the code now imports `flask_limiter`, which is not in the
/// requirements (fix: add it). Otherwise Werkzeug 3 was installed under
/// Flask 2.2, which imports `url_quote` from it (fix: pin `werkzeug<3`).
/// Both are import errors from `app/__init__.py`, a few lines apart.
fn flask_import(g: &mut Gen, missing: bool) -> Out {
    let py = g.pick(&["3.10", "3.11", "3.12"]);
    let site_packages = format!("/usr/local/lib/python{py}/site-packages");
    let exception = if missing {
        "ModuleNotFoundError: No module named 'flask_limiter'".to_string()
    } else {
        format!(
            "ImportError: cannot import name 'url_quote' from 'werkzeug.urls' ({site_packages}/werkzeug/urls.py)"
        )
    };
    // The frames from app/__init__.py down, as (file, line, function, code).
    let mut frames: Vec<(String, u64, &str, &str)> = Vec::new();
    if missing {
        frames.push((
            "/app/app/__init__.py".into(),
            7,
            "<module>",
            "from flask_limiter import Limiter",
        ));
    } else {
        frames.push((
            "/app/app/__init__.py".into(),
            3,
            "<module>",
            "from flask import Flask, jsonify",
        ));
        frames.push((
            format!("{site_packages}/flask/__init__.py"),
            5,
            "<module>",
            "from .app import Flask as Flask",
        ));
        frames.push((
            format!("{site_packages}/flask/app.py"),
            30,
            "<module>",
            "from werkzeug.urls import url_quote",
        ));
    }
    let mut t = Text::default();
    let entry = g.below(3);
    match entry {
        // pytest: the traceback is printed in its own short form, inline.
        0 => {
            t.line(command_failed(
                g.pick(&["pytest -q", "python -m pytest tests/api", "pytest -x"]),
                4,
            ));
            t.line("ImportError while loading conftest '/app/tests/conftest.py'.");
            t.line("tests/conftest.py:4: in <module>");
            t.line("    from app import create_app");
            for (file, line, _, code) in &frames {
                let file = file.trim_start_matches("/app/");
                t.line(format!("{file}:{line}: in <module>"));
                t.line(format!("    {code}"));
            }
            t.line(format!("E   {exception}"));
            return Out::plain(t);
        }
        1 => {
            let port = g.pick(&[8000, 8080, 5000]);
            t.line(command_failed(
                &format!(
                    "gunicorn -w {} -b 0.0.0.0:{port} 'app:create_app()'",
                    g.int(2, 8)
                ),
                3,
            ));
            // gunicorn's own time format: `[2025-10-14 10:02:11 +0000]`.
            let stamp = |g: &mut Gen| {
                let ts = g.timestamp();
                format!("[{} {} +0000]", &ts[0..10], &ts[11..19])
            };
            let (master, worker) = (g.int(1, 20), g.int(21, 90));
            let line = format!("{} [{master}] [INFO] Starting gunicorn 21.2.0", stamp(g));
            t.line(line);
            let line = format!(
                "{} [{master}] [INFO] Listening at: http://0.0.0.0:{port} ({master})",
                stamp(g)
            );
            t.line(line);
            let line = format!("{} [{master}] [INFO] Using worker: sync", stamp(g));
            t.line(line);
            let line = format!(
                "{} [{worker}] [INFO] Booting worker with pid: {worker}",
                stamp(g)
            );
            t.line(line);
            let line = format!(
                "{} [{worker}] [ERROR] Exception in worker process",
                stamp(g)
            );
            t.line(line);
            t.line(&exception);
            let line = format!(
                "{} [{worker}] [INFO] Worker exiting (pid: {worker})",
                stamp(g)
            );
            t.line(line);
            let line = format!("{} [{master}] [ERROR] Shutting down: Master", stamp(g));
            t.line(line);
            let line = format!(
                "{} [{master}] [ERROR] Reason: Worker failed to boot.",
                stamp(g)
            );
            t.line(line);
        }
        _ => {
            t.line(command_failed(
                &format!("python -m app.worker --queue {}", g.pick(QUEUES)),
                1,
            ));
            t.line(&exception);
        }
    }
    let mut trace = Text::default();
    trace.line("Traceback (most recent call last):");
    if entry == 1 {
        let arbiter = format!("{site_packages}/gunicorn/arbiter.py");
        py_frame(
            &mut trace,
            &arbiter,
            609,
            "spawn_worker",
            "worker.init_process()",
        );
        py_frame(
            &mut trace,
            &format!("{site_packages}/gunicorn/workers/base.py"),
            134,
            "init_process",
            "self.load_wsgi()",
        );
        py_frame(
            &mut trace,
            &format!("{site_packages}/gunicorn/util.py"),
            371,
            "import_app",
            "mod = importlib.import_module(module)",
        );
        py_frame(
            &mut trace,
            &format!("/usr/local/lib/python{py}/importlib/__init__.py"),
            126,
            "import_module",
            "return _bootstrap._gcd_import(name[level:], package, level)",
        );
    } else {
        py_frozen_frame(&mut trace, 198, "_run_module_as_main");
        py_frozen_frame(&mut trace, 88, "_run_code");
        py_frame(
            &mut trace,
            "/app/app/worker.py",
            5,
            "<module>",
            "from app import create_app",
        );
    }
    for (file, line, func, code) in &frames {
        py_frame(&mut trace, file, *line, func, code);
    }
    trace.line(&exception);
    Out::traced(t, trace)
}

// ---------------------------------------------------------------------------
// Third fresh set (98 onwards, see `fresh3`): written blind to the miner's
// rules, from what the tools themselves print, and frozen before the miner
// was run on them. The helpers below are this set's own.

/// Appends `body`'s lines to `t`.
fn append(t: &mut Text, body: &Text) {
    t.0.push_str(&body.0);
}

/// `2025-11-14 22:25:07`, the clock moving on.
fn wall_clock(g: &mut Gen) -> String {
    let ts = g.timestamp();
    format!("{} {}", &ts[..10], &ts[11..19])
}

/// Letters and digits, as in organisation and object ids.
fn alnum(g: &mut Gen, len: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|_| char::from(CHARS[g.below(CHARS.len())]))
        .collect()
}

/// A CI step that ran `command` and failed with `code`, framed the way one
/// of a few runners frames it: GitHub Actions (its raw log stamps every
/// line), GitLab, Jenkins, or a runner that states the failure first.
fn ci_step(g: &mut Gen, command: &str, code: i32, body: &Text) -> Text {
    let mut t = Text::default();
    match g.below(10) {
        0..=2 => {
            let mut lines = vec![format!("##[group]Run {command}")];
            if g.chance(60) {
                lines.push("shell: /usr/bin/bash -e {0}".to_string());
            }
            if g.chance(30) {
                lines.push("env:".to_string());
                lines.push("  CI: true".to_string());
                lines.push("  RUNNER_TEMP: /home/runner/work/_temp".to_string());
            }
            lines.push("##[endgroup]".to_string());
            lines.extend(body.0.lines().map(String::from));
            lines.push(format!("##[error]Process completed with exit code {code}."));
            for line in lines {
                let ts = g.timestamp();
                let tail = g.int(0, 9999);
                t.line(format!("{}{tail:04}Z {line}", &ts[..23]));
            }
        }
        3 | 4 => {
            t.line(format!("Run {command}"));
            append(&mut t, body);
            let error = format!("Error: Process completed with exit code {code}.");
            t.line(g.paint("31", &error));
        }
        5 | 6 => {
            let head = format!("$ {command}");
            t.line(g.paint("32;1", &head));
            append(&mut t, body);
            if g.chance(50) {
                t.line("Cleaning up project directory and file based variables");
            }
            let error = format!("ERROR: Job failed: exit code {code}");
            t.line(g.paint("31;1", &error));
        }
        7 => {
            t.line(format!("+ {command}"));
            append(&mut t, body);
            t.line(format!("ERROR: script returned exit code {code}"));
            t.line("Finished: FAILURE");
        }
        _ => {
            t.line(format!(
                "step failed: `{command}` exited with status {code}"
            ));
            t.line("--- output (tail) ---");
            append(&mut t, body);
        }
    }
    t
}

// -- RSpec ------------------------------------------------------------------

const RSPEC_SUBJECTS: &[(&str, &str)] = &[
    (
        "Checkout::CartTotal",
        "spec/services/checkout/cart_total_spec.rb",
    ),
    (
        "Billing::InvoicePresenter",
        "spec/presenters/billing/invoice_presenter_spec.rb",
    ),
    ("Subscription", "spec/models/subscription_spec.rb"),
    ("Orders API", "spec/requests/api/v1/orders_spec.rb"),
    ("WebhookDelivery", "spec/models/webhook_delivery_spec.rb"),
    (
        "Admin::ReportsController",
        "spec/controllers/admin/reports_controller_spec.rb",
    ),
    ("RefundJob", "spec/jobs/refund_job_spec.rb"),
    ("User", "spec/models/user_spec.rb"),
    (
        "Inventory::Reservation",
        "spec/models/inventory/reservation_spec.rb",
    ),
];
const RSPEC_METHODS: &[&str] = &[
    "#total",
    "#call",
    "#renew!",
    ".due_today",
    "#display_name",
    "#deliver",
    "GET /api/v1/orders/:id",
    "POST /api/v1/orders",
    "#perform",
    "#to_csv",
    "#release!",
];
const RSPEC_CONTEXTS: &[&str] = &[
    "when the coupon has expired",
    "with a guest user",
    "when the account is suspended",
    "with two currencies",
    "when the endpoint returns 500",
    "with a trial plan",
    "when the order was already refunded",
    "as an admin",
    "with a stale lock",
];
const RSPEC_ITS: &[&str] = &[
    "returns the discounted total",
    "sends exactly one email",
    "raises an error",
    "is not valid",
    "enqueues a retry",
    "returns 404",
    "renders the totals",
    "marks the delivery as failed",
    "keeps the original price",
    "returns 201 with the order",
    "frees the reserved stock",
];
const PEOPLE: &[&str] = &[
    "jane.doe",
    "o.brien",
    "mkowalski",
    "li.wei",
    "a.haddad",
    "sven",
    "priya.n",
    "tomas.r",
    "ngozi",
];

/// One failed expectation: the line that failed and what RSpec says of it.
fn rspec_expectation(g: &mut Gen) -> (String, Vec<String>) {
    match g.below(6) {
        0 => {
            let want = g.int(100, 99_999);
            let got = want + 5 * g.int(1, 400);
            (
                format!("expect(result.total_cents).to eq({want})"),
                vec![
                    String::new(),
                    format!("  expected: {want}"),
                    format!("       got: {got}"),
                    String::new(),
                    "  (compared using ==)".to_string(),
                ],
            )
        }
        1 => {
            let year = g.int(2023, 2025);
            let n = g.int(1, 9999);
            (
                format!("expect(presenter.title).to eq(\"Invoice INV-{year}-{n:04}\")"),
                vec![
                    String::new(),
                    format!("  expected: \"Invoice INV-{year}-{n:04}\""),
                    format!("       got: \"Invoice INV-{year}-{n}\""),
                    String::new(),
                    "  (compared using ==)".to_string(),
                ],
            )
        }
        2 => {
            let plan = g.pick(&["pro", "team", "starter", "enterprise"]);
            let start = wall_clock(g);
            let end = wall_clock(g);
            (
                "expect(subscription).to be_valid".to_string(),
                vec![format!(
                    "  expected #<Subscription id: nil, plan: \"{plan}\", starts_at: \"{end}.000000000 +0000\", ends_at: \"{start}.000000000 +0000\", account_id: {}> to be valid, but got errors: Ends at must be after starts at",
                    g.int(1, 90_000)
                )],
            )
        }
        3 => {
            let model = g.pick(&["Refund", "Delivery", "AuditEvent", "Reservation"]);
            (
                format!("expect {{ described_class.perform_now(order.id) }}.to change({model}, :count).by(1)"),
                vec![format!(
                    "  expected `{model}.count` to have changed by 1, but was changed by 0"
                )],
            )
        }
        4 => {
            let (want, want_code) = g.pick(&[("created", 201), ("ok", 200), ("no_content", 204)]);
            let (got, got_code) = g.pick(&[
                ("unprocessable_entity", 422),
                ("not_found", 404),
                ("internal_server_error", 500),
                ("forbidden", 403),
            ]);
            (
                format!("expect(response).to have_http_status(:{want})"),
                vec![format!(
                    "  expected the response to have status code :{want} ({want_code}) but it was :{got} ({got_code})"
                )],
            )
        }
        _ => {
            let (a, b) = g.pick_two(PEOPLE);
            let n = g.int(1, 99);
            (
                "expect(mail.to).to include(user.email)".to_string(),
                vec![
                    format!("  expected [\"{a}@acme.test\"] to include \"{b}{n}@example.com\""),
                    "  Diff:".to_string(),
                    "  @@ -1 +1 @@".to_string(),
                    format!("  -[\"{b}{n}@example.com\"]"),
                    format!("  +[\"{a}@acme.test\"]"),
                ],
            )
        }
    }
}

fn rspec_failed(g: &mut Gen) -> Out {
    let seed = g.int(1, 65_535);
    let ruby34 = g.chance(40);
    let block = |levels: u64| {
        if ruby34 {
            format!("'block ({levels} levels) in <top (required)>'")
        } else {
            format!("`block ({levels} levels) in <top (required)>'")
        }
    };
    let mut body = Text::default();
    if g.chance(25) {
        body.line(format!(
            "DEPRECATION WARNING: `{}` is deprecated and will be removed from Rails {}.{} (called from <top (required)> at /app/config/initializers/{}.rb:{})",
            g.pick(&["to_s(:db)", "ActiveSupport::Deprecation.warn", "config.active_record.legacy_connection_handling", "Rails.application.secrets"]),
            g.int(7, 8),
            g.int(0, 2),
            g.pick(&["money", "sidekiq", "time_formats", "secrets"]),
            g.int(2, 40)
        ));
    }
    if g.chance(30) {
        if ruby34 {
            body.line("Run options: exclude {slow: true}");
        } else {
            body.line("Run options: exclude {:slow=>true}");
        }
        body.line("");
    }
    body.line(format!("Randomized with seed {seed}"));
    let examples = g.int(12, 900) as usize;
    let failures = match g.below(10) {
        0..=6 => 1,
        7 | 8 => 2,
        _ => 3,
    };
    let pending = if g.chance(40) {
        g.int(1, 3) as usize
    } else {
        0
    };
    let mut marks = vec!['.'; examples];
    for (i, mark) in marks.iter_mut().enumerate().take(failures + pending) {
        *mark = if i < failures { 'F' } else { '*' };
    }
    g.shuffle(&mut marks);
    let progress: String = marks
        .iter()
        .map(|&m| match m {
            'F' => g.paint("31", "F"),
            '*' => g.paint("33", "*"),
            _ => g.paint("32", "."),
        })
        .collect();
    body.line(progress);
    body.line("");
    let describe = |g: &mut Gen| {
        let (subject, file) = g.pick(RSPEC_SUBJECTS);
        let mut name = format!("{subject} {}", g.pick(RSPEC_METHODS));
        if g.chance(70) {
            name = format!("{name} {}", g.pick(RSPEC_CONTEXTS));
        }
        (format!("{name} {}", g.pick(RSPEC_ITS)), file, g.int(8, 240))
    };
    if pending > 0 {
        body.line(
            "Pending: (Failures listed here are expected and do not affect your suite's status)",
        );
        body.line("");
        for i in 1..=pending {
            let (name, file, line) = describe(g);
            body.line(g.paint("33", &format!("  {i}) {name}")));
            let why = g.pick(&[
                "Temporarily skipped with xit",
                "Not yet implemented",
                "flaky on CI, see #4411",
            ]);
            body.line(g.paint("36", &format!("     # {why}")));
            body.line(g.paint("36", &format!("     # ./{file}:{line}")));
            body.line("");
        }
    }
    body.line("Failures:");
    body.line("");
    let mut rerun = Vec::new();
    for i in 1..=failures {
        let (name, file, line) = describe(g);
        let (code, explanation) = rspec_expectation(g);
        body.line(format!("  {i}) {name}"));
        body.line(g.paint("31", &format!("     Failure/Error: {code}")));
        for l in explanation {
            if l.is_empty() {
                body.line("");
            } else {
                body.line(g.paint("31", &format!("     {l}")));
            }
        }
        let at = line + g.int(1, 6);
        let levels = block(g.int(2, 4));
        body.line(g.paint("36", &format!("     # ./{file}:{at}:in {levels}")));
        if g.chance(40) {
            let support = g.pick(&[
                "spec/support/database_cleaner.rb:18",
                "spec/support/vcr.rb:27",
                "spec/rails_helper.rb:64",
                "spec/support/time_helpers.rb:9",
            ]);
            body.line(g.paint("36", &format!("     # ./{support}:in {}", block(2))));
        }
        body.line("");
        rerun.push((file, line, name));
    }
    let secs = g.seconds(90);
    let load = g.seconds(9);
    body.line(format!(
        "Finished in {secs} seconds (files took {load} seconds to load)"
    ));
    let mut tally = format!(
        "{examples} examples, {failures} failure{}",
        if failures == 1 { "" } else { "s" }
    );
    if pending > 0 {
        tally = format!("{tally}, {pending} pending");
    }
    body.line(g.paint("31", &tally));
    body.line("");
    body.line("Failed examples:");
    body.line("");
    for (file, line, name) in rerun {
        let command = g.paint("31", &format!("rspec ./{file}:{line}"));
        let comment = g.paint("36", &format!("# {name}"));
        body.line(format!("{command} {comment}"));
    }
    body.line("");
    body.line(format!("Randomized with seed {seed}"));
    if g.chance(35) {
        body.line("");
        let covered = g.int(2000, 9000);
        let total = covered + g.int(100, 3000);
        body.line(format!(
            "Coverage report generated for RSpec to /app/coverage. {covered} / {total} LOC ({:.2}%) covered.",
            covered as f64 * 100.0 / total as f64
        ));
        body.line("Stopped processing SimpleCov as a previous error not related to SimpleCov has been detected");
    }
    let command = g.pick(&[
        "bundle exec rspec",
        "bin/rspec",
        "bundle exec rspec --format progress",
        "bundle exec rspec spec/models spec/services spec/requests",
        "bundle exec rspec --tag ~slow",
    ]);
    Out::plain(ci_step(g, command, 1, &body))
}

// -- Laravel and MySQL: one insert into `orders`, two constraints -------------

/// Frames from the query to the queue worker: (path, line, call). Paths
/// under `app/` and `artisan` are the application's, `vendor/...` are
/// Composer packages', the rest Laravel's (`Illuminate/...`).
const LARAVEL_FRAMES: &[(&str, u32, &str)] = &[
    ("Database/Connection.php", 779, "Illuminate\\Database\\Connection->runQueryCallback('insert into `or...', Array, Object(Closure))"),
    ("Database/MySqlConnection.php", 42, "Illuminate\\Database\\Connection->run('insert into `or...', Array, Object(Closure))"),
    ("Database/Query/Processors/MySqlProcessor.php", 35, "Illuminate\\Database\\MySqlConnection->insert('insert into `or...', Array, 'id')"),
    ("Database/Query/Builder.php", 3549, "Illuminate\\Database\\Query\\Processors\\MySqlProcessor->processInsertGetId(Object(Illuminate\\Database\\Query\\Builder), 'insert into `or...', Array, 'id')"),
    ("Database/Eloquent/Builder.php", 1982, "Illuminate\\Database\\Query\\Builder->insertGetId(Array, 'id')"),
    ("Database/Eloquent/Model.php", 1334, "Illuminate\\Database\\Eloquent\\Builder->__call('insertGetId', Array)"),
    ("Database/Eloquent/Model.php", 1299, "Illuminate\\Database\\Eloquent\\Model->insertAndSetId(Object(Illuminate\\Database\\Eloquent\\Builder), Array)"),
    ("Database/Eloquent/Model.php", 1138, "Illuminate\\Database\\Eloquent\\Model->performInsert(Object(Illuminate\\Database\\Eloquent\\Builder))"),
    ("Database/Eloquent/Builder.php", 1025, "Illuminate\\Database\\Eloquent\\Model->save()"),
    ("Support/helpers.php", 320, "Illuminate\\Database\\Eloquent\\Builder->Illuminate\\Database\\Eloquent\\{closure}(Object(App\\Models\\Order))"),
    ("Database/Eloquent/Builder.php", 1024, "tap(Object(App\\Models\\Order), Object(Closure))"),
    ("Support/Traits/ForwardsCalls.php", 23, "Illuminate\\Database\\Eloquent\\Builder->create(Array)"),
    ("Database/Eloquent/Model.php", 2334, "Illuminate\\Database\\Eloquent\\Model->forwardCallTo(Object(Illuminate\\Database\\Eloquent\\Builder), 'create', Array)"),
    ("Database/Eloquent/Model.php", 2346, "Illuminate\\Database\\Eloquent\\Model->__call('create', Array)"),
    ("app/Services/OrderImporter.php", 58, "Illuminate\\Database\\Eloquent\\Model::__callStatic('create', Array)"),
    ("app/Jobs/{job}.php", 0, "App\\Services\\OrderImporter->import(Array)"),
    ("Container/BoundMethod.php", 36, "App\\Jobs\\{job}->handle(Object(App\\Services\\OrderImporter))"),
    ("Container/Util.php", 43, "Illuminate\\Container\\BoundMethod::Illuminate\\Container\\{closure}()"),
    ("Container/BoundMethod.php", 95, "Illuminate\\Container\\Util::unwrapIfClosure(Object(Closure))"),
    ("Container/BoundMethod.php", 35, "Illuminate\\Container\\BoundMethod::callBoundMethod(Object(Illuminate\\Foundation\\Application), Array, Object(Closure))"),
    ("Container/Container.php", 696, "Illuminate\\Container\\BoundMethod::call(Object(Illuminate\\Foundation\\Application), Array, Array, NULL)"),
    ("Bus/Dispatcher.php", 126, "Illuminate\\Container\\Container->call(Array)"),
    ("Pipeline/Pipeline.php", 170, "Illuminate\\Bus\\Dispatcher->Illuminate\\Bus\\{closure}(Object(App\\Jobs\\{job}))"),
    ("Pipeline/Pipeline.php", 127, "Illuminate\\Pipeline\\Pipeline->Illuminate\\Pipeline\\{closure}(Object(App\\Jobs\\{job}))"),
    ("Bus/Dispatcher.php", 130, "Illuminate\\Pipeline\\Pipeline->then(Object(Closure))"),
    ("Queue/CallQueuedHandler.php", 126, "Illuminate\\Bus\\Dispatcher->dispatchNow(Object(App\\Jobs\\{job}), false)"),
    ("Pipeline/Pipeline.php", 170, "Illuminate\\Queue\\CallQueuedHandler->Illuminate\\Queue\\{closure}(Object(App\\Jobs\\{job}))"),
    ("Pipeline/Pipeline.php", 127, "Illuminate\\Pipeline\\Pipeline->Illuminate\\Pipeline\\{closure}(Object(App\\Jobs\\{job}))"),
    ("Queue/CallQueuedHandler.php", 121, "Illuminate\\Pipeline\\Pipeline->then(Object(Closure))"),
    ("Queue/CallQueuedHandler.php", 69, "Illuminate\\Queue\\CallQueuedHandler->dispatchThroughMiddleware(Object(Illuminate\\Queue\\Jobs\\{qjob}), Object(App\\Jobs\\{job}))"),
    ("Queue/Jobs/Job.php", 102, "Illuminate\\Queue\\CallQueuedHandler->call(Object(Illuminate\\Queue\\Jobs\\{qjob}), Array)"),
    ("Queue/Worker.php", 441, "Illuminate\\Queue\\Jobs\\Job->fire()"),
    ("Queue/Worker.php", 391, "Illuminate\\Queue\\Worker->process('{conn}', Object(Illuminate\\Queue\\Jobs\\{qjob}), Object(Illuminate\\Queue\\WorkerOptions))"),
    ("Queue/Worker.php", 177, "Illuminate\\Queue\\Worker->runJob(Object(Illuminate\\Queue\\Jobs\\{qjob}), '{conn}', Object(Illuminate\\Queue\\WorkerOptions))"),
    ("Queue/Console/WorkCommand.php", 148, "Illuminate\\Queue\\Worker->daemon('{conn}', '{queue}', Object(Illuminate\\Queue\\WorkerOptions))"),
    ("Queue/Console/WorkCommand.php", 131, "Illuminate\\Queue\\Console\\WorkCommand->runWorker('{conn}', '{queue}')"),
    ("Container/BoundMethod.php", 36, "Illuminate\\Queue\\Console\\WorkCommand->handle()"),
    ("Container/Util.php", 43, "Illuminate\\Container\\BoundMethod::Illuminate\\Container\\{closure}()"),
    ("Container/BoundMethod.php", 95, "Illuminate\\Container\\Util::unwrapIfClosure(Object(Closure))"),
    ("Container/BoundMethod.php", 35, "Illuminate\\Container\\BoundMethod::callBoundMethod(Object(Illuminate\\Foundation\\Application), Array, Object(Closure))"),
    ("Container/Container.php", 696, "Illuminate\\Container\\BoundMethod::call(Object(Illuminate\\Foundation\\Application), Array, Array, NULL)"),
    ("Console/Command.php", 213, "Illuminate\\Container\\Container->call(Array)"),
    ("vendor/symfony/console/Command/Command.php", 279, "Illuminate\\Console\\Command->execute(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Illuminate\\Console\\OutputStyle))"),
    ("Console/Command.php", 182, "Symfony\\Component\\Console\\Command\\Command->run(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Illuminate\\Console\\OutputStyle))"),
    ("vendor/symfony/console/Application.php", 1047, "Illuminate\\Console\\Command->run(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Symfony\\Component\\Console\\Output\\ConsoleOutput))"),
    ("vendor/symfony/console/Application.php", 316, "Symfony\\Component\\Console\\Application->doRunCommand(Object(Illuminate\\Queue\\Console\\WorkCommand), Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Symfony\\Component\\Console\\Output\\ConsoleOutput))"),
    ("vendor/symfony/console/Application.php", 167, "Symfony\\Component\\Console\\Application->doRun(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Symfony\\Component\\Console\\Output\\ConsoleOutput))"),
    ("Foundation/Console/Kernel.php", 197, "Symfony\\Component\\Console\\Application->run(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Symfony\\Component\\Console\\Output\\ConsoleOutput))"),
    ("artisan", 35, "Illuminate\\Foundation\\Console\\Kernel->handle(Object(Symfony\\Component\\Console\\Input\\ArgvInput), Object(Symfony\\Component\\Console\\Output\\ConsoleOutput))"),
];

/// The jobs that import orders, and the line of each that calls the
/// importer.
const ORDER_JOBS: &[(&str, u32)] = &[
    ("ImportShopifyOrder", 41),
    ("SyncMarketplaceOrders", 77),
    ("ImportOrdersCsv", 63),
];

/// A queue job's insert into `orders` fails on MySQL: a duplicate
/// `external_ref` (1062) or a customer that does not exist (1452). Both
/// are SQLSTATE 23000 from the same statement at the same call site.
fn laravel_orders_insert(g: &mut Gen, duplicate: bool) -> Out {
    let (job, job_line) = g.pick(ORDER_JOBS);
    let reference = match job {
        "ImportShopifyOrder" => format!("shopify-{}", g.int(4_000_000_000, 6_999_999_999)),
        "SyncMarketplaceOrders" => format!(
            "{:03}-{:07}-{:07}",
            g.int(100, 999),
            g.int(0, 9_999_999),
            g.int(0, 9_999_999)
        ),
        _ => {
            let day = g.timestamp();
            format!(
                "CSV-{}{}{}-{:04}",
                &day[0..4],
                &day[5..7],
                &day[8..10],
                g.int(1, 9999)
            )
        }
    };
    // Laravel 9, 10 and 11: the vendor lines move, the message changed
    // (the connection's name, a class of its own for unique violations).
    let version = g.below(3);
    let root = g.pick(&[
        "/var/www/html",
        "/var/www/html",
        "/home/forge/shop.acme.com",
        "/app",
    ]);
    let (conn, qjob) = g.pick(&[
        ("redis", "RedisJob"),
        ("redis", "RedisJob"),
        ("database", "DatabaseJob"),
        ("sqs", "SqsJob"),
    ]);
    let queue = g.pick(&["default", "imports", "orders", "high"]);
    let placed = wall_clock(g);
    let now = wall_clock(g);
    let customer = g.int(1000, 250_000);
    let total = g.int(199, 250_000);
    let currency = g.pick(&["EUR", "USD", "GBP", "SEK", "PLN"]);
    let status = g.pick(&["pending", "paid", "pending"]);
    let sql = format!(
        "insert into `orders` (`external_ref`, `customer_id`, `status`, `total_cents`, `currency`, `placed_at`, `updated_at`, `created_at`) values ({reference}, {customer}, {status}, {total}, {currency}, {placed}, {now}, {now})"
    );
    let sql = if version == 0 {
        format!("(SQL: {sql})")
    } else {
        format!("(Connection: mysql, SQL: {sql})")
    };
    let mysql8 = g.chance(80);
    let database = g.pick(&["shop", "shop_production", "forge", "laravel"]);
    let detail = if duplicate {
        let key = if mysql8 {
            "orders.orders_external_ref_unique"
        } else {
            "orders_external_ref_unique"
        };
        format!("1062 Duplicate entry '{reference}' for key '{key}'")
    } else {
        format!(
            "1452 Cannot add or update a child row: a foreign key constraint fails (`{database}`.`orders`, CONSTRAINT `orders_customer_id_foreign` FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`) ON DELETE CASCADE)"
        )
    };
    let pdo_message = format!("SQLSTATE[23000]: Integrity constraint violation: {detail}");
    let message = format!("{pdo_message} {sql}");
    let class = if duplicate && version > 0 {
        "Illuminate\\Database\\UniqueConstraintViolationException"
    } else {
        "Illuminate\\Database\\QueryException"
    };
    let shift = |line: u32| line + version as u32 * (line % 23);
    let framework = format!("{root}/vendor/laravel/framework/src/Illuminate");
    let frames: Vec<String> = LARAVEL_FRAMES
        .iter()
        .map(|&(path, line, call)| {
            let call = call
                .replace("{job}", job)
                .replace("{qjob}", qjob)
                .replace("{conn}", conn)
                .replace("{queue}", queue);
            let (file, line) = if path.starts_with("app/") || path == "artisan" {
                let line = if line == 0 { job_line } else { line };
                (format!("{root}/{}", path.replace("{job}", job)), line)
            } else if path.starts_with("vendor/") {
                (format!("{root}/{path}"), shift(line))
            } else {
                (format!("{framework}/{path}"), shift(line))
            };
            format!("{file}({line}): {call}")
        })
        .collect();
    let thrown = format!("{framework}/Database/Connection.php:{}", shift(825));
    if g.chance(65) {
        // The failed job's record: the exception's message, its trace apart.
        let mut trace = Text::default();
        for (i, frame) in frames.iter().enumerate() {
            trace.line(format!("#{i} {frame}"));
        }
        trace.line(format!("#{} {{main}}", frames.len()));
        let mut t = Text::default();
        t.line(message);
        return Out::traced(t, trace);
    }
    // laravel.log: Monolog's line, the context JSON-encoded (backslashes
    // doubled), the trace inside it.
    let env = g.pick(&["production", "production", "staging"]);
    let mut t = Text::default();
    for _ in 0..g.int(0, 6) {
        let ts = wall_clock(g);
        let line = match g.below(3) {
            0 => format!(
                "[{ts}] {env}.INFO: Importing order {{\"ref\":\"{}\",\"source\":\"{}\"}} ",
                g.int(10_000, 99_999_999),
                g.pick(&["shopify", "amazon", "csv", "ebay"])
            ),
            1 => format!(
                "[{ts}] {env}.WARNING: Rate limited by upstream, sleeping {{\"seconds\":{}}} ",
                g.int(1, 30)
            ),
            _ => format!(
                "[{ts}] {env}.DEBUG: Customer resolved {{\"customer_id\":{},\"created\":false}} ",
                g.int(1000, 250_000)
            ),
        };
        t.line(line);
    }
    let ts = wall_clock(g);
    let escape = |s: &str| s.replace('\\', "\\\\");
    t.line(format!(
        "[{ts}] {env}.ERROR: {message} {{\"exception\":\"[object] ({}(code: 23000): {message} at {thrown})",
        escape(class)
    ));
    t.line("[stacktrace]");
    for (i, frame) in frames.iter().enumerate() {
        t.line(format!("#{i} {}", escape(frame)));
    }
    t.line(format!("#{} {{main}}", frames.len()));
    t.line("");
    t.line(format!(
        "[previous exception] [object] (PDOException(code: 23000): {pdo_message} at {framework}/Database/Connection.php:{})",
        shift(587)
    ));
    t.line("[stacktrace]");
    t.line(format!(
        "#0 {}",
        escape(&format!(
            "{framework}/Database/Connection.php({}): PDOStatement->execute()",
            shift(587)
        ))
    ));
    t.line(format!(
        "#1 {}",
        escape(&format!("{framework}/Database/Connection.php({}): Illuminate\\Database\\Connection->Illuminate\\Database\\{{closure}}('insert into `or...', Array)", shift(812)))
    ));
    for (i, frame) in frames.iter().enumerate() {
        t.line(format!("#{} {}", i + 2, escape(frame)));
    }
    t.line(format!("#{} {{main}}", frames.len() + 2));
    t.line("\"} ");
    Out::plain(t)
}

// -- .NET: one NullReferenceException, two call sites -----------------------

/// Where a NullReferenceException is thrown, who calls it, and the tests
/// that reach it: (test class, its test methods).
struct NetSite {
    frame: &'static str,
    file: &'static str,
    line: u32,
    callers: &'static [(&'static str, &'static str, u32)],
    tests: &'static [(&'static str, &'static [&'static str])],
}

const NRE_DISCOUNT: NetSite = NetSite {
    frame: "OrdersApi.Services.DiscountCalculator.Apply(Order order, Customer customer)",
    file: "src/OrdersApi/Services/DiscountCalculator.cs",
    line: 41,
    callers: &[
        (
            "OrdersApi.Services.CheckoutService.PriceAsync(Cart cart, CancellationToken ct)",
            "src/OrdersApi/Services/CheckoutService.cs",
            88,
        ),
        (
            "OrdersApi.Services.QuoteService.Build(Quote quote)",
            "src/OrdersApi/Services/QuoteService.cs",
            52,
        ),
    ],
    tests: &[
        (
            "OrdersApi.Tests.Services.CheckoutServiceTests",
            &[
                "PriceAsync_GoldCustomer_AppliesTenPercent",
                "PriceAsync_GuestCheckout_NoDiscount",
                "PriceAsync_ExpiredCoupon_IgnoresCoupon",
            ],
        ),
        (
            "OrdersApi.Tests.Services.QuoteServiceTests",
            &[
                "Build_WithCoupon_ReducesTotal",
                "Build_B2BCustomer_UsesContractPrice",
            ],
        ),
        (
            "OrdersApi.Tests.Integration.CheckoutEndpointTests",
            &[
                "PostCheckout_Returns200_WithTotals",
                "PostCheckout_AppliesLoyaltyTier",
            ],
        ),
    ],
};

const NRE_INVOICE: NetSite = NetSite {
    frame: "OrdersApi.Rendering.InvoiceRenderer.RenderLines(Invoice invoice, CultureInfo culture)",
    file: "src/OrdersApi/Rendering/InvoiceRenderer.cs",
    line: 118,
    callers: &[
        (
            "OrdersApi.Rendering.InvoiceRenderer.RenderAsync(Invoice invoice, Stream output)",
            "src/OrdersApi/Rendering/InvoiceRenderer.cs",
            64,
        ),
        (
            "OrdersApi.Billing.InvoiceMailer.SendAsync(Invoice invoice, CancellationToken ct)",
            "src/OrdersApi/Billing/InvoiceMailer.cs",
            33,
        ),
    ],
    tests: &[
        (
            "OrdersApi.Tests.Rendering.InvoiceRendererTests",
            &[
                "RenderAsync_CreditNote_RendersNegativeTotals",
                "RenderAsync_GermanCulture_UsesCommaDecimals",
                "RenderAsync_NoLines_RendersEmptyTable",
            ],
        ),
        (
            "OrdersApi.Tests.Billing.InvoiceMailerTests",
            &["SendAsync_AttachesPdf", "SendAsync_ReverseCharge_AddsNote"],
        ),
    ],
};

const CS_WARNINGS: &[(&str, &str)] = &[
    ("CS8602", "Dereference of a possibly null reference."),
    (
        "CS8618",
        "Non-nullable property 'Name' must contain a non-null value when exiting constructor. Consider adding the 'required' modifier or declaring the property as nullable.",
    ),
    ("CS0168", "The variable 'ex' is declared but never used"),
    (
        "CS1998",
        "This async method lacks 'await' operators and will run synchronously. Consider using the 'await' operator to await non-blocking API calls, or 'await Task.Run(...)' to do CPU-bound work on a background thread.",
    ),
];

fn dotnet_nre(g: &mut Gen, site: &NetSite) -> Out {
    let windows = g.chance(25);
    let root = if windows {
        g.pick(&[
            "D:\\a\\orders-api\\orders-api\\",
            "C:\\agent\\_work\\7\\s\\",
        ])
        .to_string()
    } else {
        g.pick(&[
            "/home/runner/work/orders-api/orders-api/",
            "/app/",
            "/builds/acme/orders-api/",
        ])
        .to_string()
    };
    let path = |p: &str| {
        if windows {
            format!("{root}{}", p.replace('/', "\\"))
        } else {
            format!("{root}{p}")
        }
    };
    let tfm = g.pick(&["net8.0", "net8.0", "net9.0"]);
    let framework = g.below(3); // xUnit, NUnit, MSTest
    let mut body = Text::default();
    body.line("  Determining projects to restore...");
    if g.chance(60) {
        body.line("  All projects are up-to-date for restore.");
    } else {
        let took = g.seconds(3);
        body.line(format!(
            "  Restored {} (in {took} sec).",
            path("src/OrdersApi/OrdersApi.csproj")
        ));
    }
    for _ in 0..g.int(0, 5) {
        let (code, text) = g.pick(CS_WARNINGS);
        let file = g.pick(&[
            "src/OrdersApi/Services/CheckoutService.cs",
            "src/OrdersApi/Models/Customer.cs",
            "src/OrdersApi/Controllers/OrdersController.cs",
            "src/OrdersApi/Billing/TaxRates.cs",
        ]);
        let warning = g.paint("33", &format!("warning {code}"));
        body.line(format!(
            "{}({},{}): {warning}: {text} [{}]",
            path(file),
            g.int(10, 300),
            g.int(5, 60),
            path("src/OrdersApi/OrdersApi.csproj")
        ));
    }
    body.line(format!(
        "  OrdersApi -> {}",
        path(&format!("src/OrdersApi/bin/Release/{tfm}/OrdersApi.dll"))
    ));
    let tests_dll = path(&format!(
        "tests/OrdersApi.Tests/bin/Release/{tfm}/OrdersApi.Tests.dll"
    ));
    body.line(format!("  OrdersApi.Tests -> {tests_dll}"));
    body.line(format!(
        "Test run for {tests_dll} (.NETCoreApp,Version=v{})",
        &tfm[3..]
    ));
    body.line(format!(
        "VSTest version 17.{}.{} ({})",
        g.int(8, 12),
        g.int(0, 3),
        g.pick(&["x64", "x64", "arm64"])
    ));
    body.line("");
    body.line("Starting test execution, please wait...");
    body.line("A total of 1 test files matched the specified pattern.");
    let failed = if g.chance(75) { 1 } else { g.int(2, 4) };
    for _ in 0..failed {
        let (class, methods) = g.pick(site.tests);
        let method = g.pick(methods);
        let (caller, caller_file, caller_line) = g.pick(site.callers);
        let ms = g.int(3, 900);
        let test_file = format!(
            "tests/OrdersApi.Tests/{}.cs",
            class["OrdersApi.Tests.".len()..].replace('.', "/")
        );
        let test_line = g.int(20, 180);
        let shown = if framework == 0 {
            format!("{class}.{method}")
        } else {
            method.to_string()
        };
        if framework == 0 {
            let clock = format!("00:00:{:02}.{:02}", g.int(0, 59), g.int(0, 99));
            body.line(format!("[xUnit.net {clock}]     {class}.{method} [FAIL]"));
        }
        body.line(g.paint("31", &format!("  Failed {shown} [{ms} ms]")));
        body.line("  Error Message:");
        if framework == 2 {
            body.line(format!("   Test method {class}.{method} threw exception: "));
            body.line("System.NullReferenceException: Object reference not set to an instance of an object.");
        } else {
            body.line("   System.NullReferenceException : Object reference not set to an instance of an object.");
        }
        body.line("  Stack Trace:");
        let indent = if framework == 2 { "      " } else { "     " };
        body.line(format!(
            "{indent}at {} in {}:line {}",
            site.frame,
            path(site.file),
            site.line
        ));
        body.line(format!(
            "   at {caller} in {}:line {caller_line}",
            path(caller_file)
        ));
        if caller.contains("Async") {
            body.line("--- End of stack trace from previous location ---");
        }
        body.line(format!(
            "   at {class}.{method}() in {}:line {test_line}",
            path(&test_file)
        ));
        body.line("--- End of stack trace from previous location ---");
        body.line("");
    }
    let passed = g.int(40, 900);
    let skipped = g.int(0, 6);
    let total = passed + skipped + failed;
    let summary = format!(
        "Failed!  - Failed: {failed:>5}, Passed: {passed:>5}, Skipped: {skipped:>5}, Total: {total:>5}, Duration: {} s - OrdersApi.Tests.dll ({tfm})",
        g.int(1, 40)
    );
    body.line(g.paint("31", &summary));
    let command = g.pick(&[
        "dotnet test --no-restore --configuration Release",
        "dotnet test OrdersApi.sln -c Release --logger \"trx;LogFileName=results.trx\"",
        "dotnet test --no-build -c Release --verbosity normal",
    ]);
    Out::plain(ci_step(g, command, 1, &body))
}

// -- Playwright: a failed expect against a test timeout, one runner --------

/// The tests that reach one cause: (spec file, describe, title, line).
const PW_CART_TOTAL: &[(&str, &str, &str, u64)] = &[
    (
        "tests/cart.spec.ts",
        "cart",
        "removing the last item empties the cart",
        33,
    ),
    (
        "tests/cart.spec.ts",
        "cart",
        "quantity stepper updates the total",
        58,
    ),
    (
        "tests/coupons.spec.ts",
        "coupons",
        "SAVE10 takes ten percent off",
        21,
    ),
    (
        "tests/e2e/guest-cart.spec.ts",
        "guest cart",
        "cart survives a reload",
        47,
    ),
];
const PW_PLACE_ORDER: &[(&str, &str, &str, u64)] = &[
    (
        "tests/checkout.spec.ts",
        "checkout",
        "guest can place an order",
        60,
    ),
    (
        "tests/checkout.spec.ts",
        "checkout",
        "saved card checkout",
        94,
    ),
    ("tests/gift.spec.ts", "gifts", "order with a gift note", 38),
];
const PW_PASSING: &[&str] = &[
    "tests/auth.spec.ts:12:7 › auth › signs in with a magic link",
    "tests/auth.spec.ts:40:7 › auth › locks the account after five attempts",
    "tests/search.spec.ts:9:5 › search shows suggestions",
    "tests/search.spec.ts:31:5 › search › no results state",
    "tests/account.spec.ts:18:7 › account › updates the shipping address",
    "tests/account.spec.ts:55:7 › account › downloads an invoice",
    "tests/catalog.spec.ts:14:7 › catalog › filters by size",
    "tests/catalog.spec.ts:29:7 › catalog › sorts by price",
    "tests/wishlist.spec.ts:8:7 › wishlist › adds and removes an item",
    "tests/a11y.spec.ts:6:5 › home page has no a11y violations",
];

fn money(g: &mut Gen) -> String {
    format!("${}.{:02}", g.int(1, 480), g.int(0, 99))
}

fn playwright(g: &mut Gen, timeout: bool) -> Out {
    let sites = if timeout {
        PW_PLACE_ORDER
    } else {
        PW_CART_TOTAL
    };
    let (file, describe, title, line) = g.pick(sites);
    let command = g.pick(&[
        "npx playwright test",
        "npx playwright test --reporter=list",
        "pnpm exec playwright test --project=chromium",
        "npm run test:e2e",
        "yarn playwright test --retries=2",
    ]);
    let project = if command.contains("--project=chromium") {
        "chromium"
    } else {
        g.pick(&["chromium", "chromium", "firefox", "webkit", "Mobile Safari"])
    };
    let root = g.pick(&[
        "/home/runner/work/shop/shop",
        "/builds/acme/shop-web",
        "/app",
    ]);
    let workers = g.int(1, 8);
    let total = g.int(20, 260);
    let retries = g.below(3) as u64;
    let mut body = Text::default();
    if g.chance(30) {
        body.line(format!("> shop-web@{} test:e2e", g.version()));
        body.line("> playwright test");
        body.line("");
    }
    body.line(format!(
        "Running {total} tests using {workers} worker{}",
        if workers == 1 { "" } else { "s" }
    ));
    body.line("");
    let mut passing: Vec<&str> = PW_PASSING.to_vec();
    g.shuffle(&mut passing);
    let shown = g.int(0, passing.len() as u64);
    let mut passing = passing.into_iter();
    let mut index = 0;
    let column = if file.contains("e2e") { 5 } else { 7 };
    let test_id = format!("[{project}] › {file}:{line}:{column} › {describe} › {title}");
    let failed_at = g.int(0, shown);
    for i in 0..=shown {
        index += 1;
        if i == failed_at {
            for attempt in 0..=retries {
                let secs = if timeout {
                    format!("{}.{}s", 30 + g.int(0, 1), g.int(0, 9))
                } else {
                    format!("{}.{}s", g.int(5, 9), g.int(0, 9))
                };
                let retry = if attempt == 0 {
                    String::new()
                } else {
                    format!(" (retry #{attempt})")
                };
                let mark = g.paint("31", "✘");
                body.line(format!("  {mark} {index:>3} {test_id}{retry} ({secs})"));
                index += u64::from(attempt < retries);
            }
        } else {
            let passing = passing.next().unwrap_or(PW_PASSING[0]);
            let ms = g.int(300, 9000);
            let mark = g.paint("32", "✓");
            body.line(format!(
                "  {mark} {index:>3} [{project}] › {passing} ({}.{}s)",
                ms / 1000,
                ms % 1000 / 100
            ));
        }
    }
    body.line("");
    body.line("");
    let header = format!("  1) {test_id} ");
    let rule: String =
        std::iter::repeat_n('─', 120usize.saturating_sub(header.chars().count())).collect();
    body.line(g.paint("31", &format!("{header}{rule}")));
    body.line("");
    let attempts = if retries > 0 { retries + 1 } else { 1 };
    for attempt in 0..attempts {
        if attempt > 0 {
            let retry = format!("    Retry #{attempt} ───────────────────────────────────────────────────────────────────────────────────────");
            body.line(g.paint("2", &retry));
            body.line("");
        }
        if timeout {
            let block = playwright_timeout_block(g, root, file, line);
            append(&mut body, &block);
        } else {
            playwright_expect_block(g, root, file, line, &mut body);
        }
    }
    let slug: String = format!(
        "{}-{describe}-{title}",
        file.trim_start_matches("tests/")
            .trim_end_matches(".spec.ts")
    )
    .chars()
    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
    .take(60)
    .collect();
    body.line(
        "    attachment #1: screenshot (image/png) ──────────────────────────────────────────────",
    );
    body.line(format!(
        "    test-results/{slug}-{}/test-failed-1.png",
        project.to_lowercase().replace(' ', "-")
    ));
    body.line("    ────────────────────────────────────────────────────────────────────────────────────────────────");
    if g.chance(50) {
        body.line("");
        body.line(format!(
            "    Error Context: test-results/{slug}-{}/error-context.md",
            project.to_lowercase().replace(' ', "-")
        ));
    }
    body.line("");
    let flaky = if g.chance(30) { g.int(1, 3) } else { 0 };
    let skipped = g.int(0, 5);
    body.line(g.paint("31", "  1 failed"));
    body.line(g.paint("31", &format!("    {test_id} ")));
    if flaky > 0 {
        body.line(g.paint("33", &format!("  {flaky} flaky")));
        for _ in 0..flaky {
            let passing = g.pick(PW_PASSING);
            body.line(g.paint("33", &format!("    [{project}] › {passing} ")));
        }
    }
    if skipped > 0 {
        body.line(g.paint("33", &format!("  {skipped} skipped")));
    }
    let passed = total.saturating_sub(1 + flaky + skipped);
    let took = g.int(20, 400);
    let took = if took < 60 {
        format!("{took}.{}s", g.int(0, 9))
    } else {
        format!("{}.{}m", took / 60, took % 60 / 6)
    };
    body.line(g.paint("32", &format!("  {passed} passed ({took})")));
    if g.chance(40) {
        body.line("");
        body.line("  Serving HTML report at http://localhost:9323. Press Ctrl+C to quit.");
    }
    Out::plain(ci_step(g, command, 1, &body))
}

/// The expect that fails: the cart total that did not update.
fn playwright_expect_block(g: &mut Gen, root: &str, file: &str, line: u64, body: &mut Text) {
    let expected = if g.chance(40) {
        "$0.00".to_string()
    } else {
        money(g)
    };
    let received = money(g);
    let wait = g.pick(&[5000, 5000, 10000]);
    if g.chance(50) {
        // Playwright 1.5x
        body.line("    Error: expect(locator).toHaveText(expected) failed");
        body.line("");
        body.line("    Locator:  getByTestId('cart-total')");
        body.line(format!("    Expected: \"{expected}\""));
        body.line(format!("    Received: \"{received}\""));
        body.line(format!("    Timeout:  {wait}ms"));
        body.line("");
        body.line("    Call log:");
        body.line(format!(
            "      - Expect \"toHaveText\" with timeout {wait}ms"
        ));
        body.line("      - waiting for getByTestId('cart-total')");
        body.line(format!(
            "        {} × locator resolved to <span data-testid=\"cart-total\" class=\"tabular-nums\">{received}</span>",
            g.int(2, 14)
        ));
        body.line(format!("          - unexpected value \"{received}\""));
    } else {
        // Playwright 1.4x
        body.line(format!(
            "    Error: Timed out {wait}ms waiting for expect(locator).toHaveText(expected)"
        ));
        body.line("");
        body.line("    Locator: getByTestId('cart-total')");
        body.line(format!("    Expected string: \"{expected}\""));
        body.line(format!("    Received string: \"{received}\""));
        body.line("    Call log:");
        body.line(format!("      - expect.toHaveText with timeout {wait}ms"));
        body.line("      - waiting for getByTestId('cart-total')");
        for _ in 0..g.int(1, 9) {
            body.line("      -   locator resolved to <span data-testid=\"cart-total\" class=\"tabular-nums\">…</span>");
            body.line(format!("      -   unexpected value \"{received}\""));
        }
    }
    body.line("");
    body.line("");
    let code_col = 50;
    body.line(format!(
        "      {} |     await page.getByRole('button', {{ name: '{}' }}).click();",
        line - 2,
        g.pick(&["Remove", "Increase quantity", "Apply coupon"])
    ));
    body.line(format!(
        "      {} |     await page.waitForLoadState('networkidle');",
        line - 1
    ));
    body.line(format!(
        "    > {line} |     await expect(page.getByTestId('cart-total')).toHaveText('{expected}');"
    ));
    body.line(format!("         |{}^", " ".repeat(code_col)));
    body.line(format!("      {} |   }});", line + 1));
    body.line("");
    body.line(format!("        at {root}/{file}:{line}:{}", code_col + 1));
    body.line("");
}

/// The test that times out: the order button that stays disabled.
fn playwright_timeout_block(g: &mut Gen, root: &str, file: &str, line: u64) -> Text {
    let mut t = Text::default();
    let limit = g.pick(&[30000, 30000, 60000]);
    t.line(format!("    Test timeout of {limit}ms exceeded."));
    t.line("");
    t.line(format!(
        "    Error: locator.click: Test timeout of {limit}ms exceeded."
    ));
    t.line("    Call log:");
    t.line("      - waiting for getByRole('button', { name: 'Place order' })");
    t.line("        - locator resolved to <button disabled type=\"submit\" data-testid=\"place-order\" class=\"btn btn-primary w-full\">Place order</button>");
    t.line("      - attempting click action");
    t.line("        2 × waiting for element to be visible, enabled and stable");
    t.line("          - element is not enabled");
    t.line("        - retrying click action");
    t.line("        - waiting 20ms");
    t.line("        2 × waiting for element to be visible, enabled and stable");
    t.line("          - element is not enabled");
    t.line("        - retrying click action");
    t.line("          - waiting 100ms");
    t.line(format!(
        "        {} × waiting for element to be visible, enabled and stable",
        g.int(20, 120)
    ));
    t.line("          - element is not enabled");
    t.line("        - retrying click action");
    t.line("          - waiting 500ms");
    t.line("");
    t.line("");
    t.line(format!(
        "      {} |     await page.getByLabel('Card number').fill('4242 4242 4242 4242');",
        line - 2
    ));
    t.line(format!(
        "      {} |     await page.getByLabel('Expiry').fill('{:02}/{}');",
        line - 1,
        g.int(1, 12),
        g.int(27, 34)
    ));
    t.line(format!(
        "    > {line} |     await page.getByRole('button', {{ name: 'Place order' }}).click();"
    ));
    t.line(format!("         |{}^", " ".repeat(62)));
    t.line(format!(
        "      {} |     await expect(page).toHaveURL(/\\/orders\\/\\d+/);",
        line + 1
    ));
    t.line("");
    t.line(format!("        at {root}/{file}:{line}:63"));
    t.line("");
    t
}

// -- OpenAI from an agent: a rate limit against an exhausted quota ----------

const OPENAI_MODELS: &[&str] = &[
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4.1",
    "gpt-4.1-mini",
    "o3-mini",
    "o4-mini",
];
const QUOTA_TEXT: &str = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.";

/// The 429's error object: (message, type, code).
fn openai_429_error(g: &mut Gen, quota: bool, model: &str) -> (String, &'static str, &'static str) {
    if quota {
        return (
            QUOTA_TEXT.to_string(),
            "insufficient_quota",
            "insufficient_quota",
        );
    }
    let org = format!("org-{}", alnum(g, 24));
    if g.chance(70) {
        let limit = g.pick(&[30_000u64, 200_000, 450_000, 800_000, 2_000_000]);
        let used = limit - g.int(0, limit / 10);
        let requested = g.int(800, 40_000);
        let wait = format!("{}.{:03}s", g.int(0, 40), g.int(0, 999));
        (
            format!("Rate limit reached for {model} in organization {org} on tokens per min (TPM): Limit {limit}, Used {used}, Requested {requested}. Please try again in {wait}. Visit https://platform.openai.com/account/rate-limits to learn more."),
            "tokens",
            "rate_limit_exceeded",
        )
    } else {
        let limit = g.pick(&[500u64, 3_500, 5_000, 10_000]);
        (
            format!("Rate limit reached for {model} in organization {org} on requests per min (RPM): Limit {limit}, Used {limit}, Requested 1. Please try again in {}ms. Visit https://platform.openai.com/account/rate-limits to learn more.", g.int(6, 900)),
            "requests",
            "rate_limit_exceeded",
        )
    }
}

fn agent_log_prelude(g: &mut Gen, t: &mut Text, style: usize, run: &str, item: &str, model: &str) {
    for turn in 1..=g.int(0, 12) {
        let ts = g.timestamp();
        let now = g.clock;
        let tool = g.pick(&[
            "read_file",
            "bash",
            "edit_file",
            "grep",
            "list_dir",
            "run_tests",
        ]);
        let ms = g.int(200, 30_000);
        let tokens = g.int(2_000, 120_000);
        let line = match style {
            0 => format!(
                "{} {},{} INFO agent.loop: turn {turn} item={item} model={model} tool={tool} prompt_tokens={tokens} elapsed_ms={ms}",
                &ts[..10],
                &ts[11..19],
                &ts[20..23]
            ),
            1 => format!(
                "time={ts} level=INFO msg=\"turn finished\" run={run} item={item} turn={turn} model={model} tool={tool} prompt_tokens={tokens} duration={ms}ms"
            ),
            _ => format!(
                "{{\"level\":30,\"time\":{},\"pid\":{},\"hostname\":\"agent-worker-{}\",\"run\":\"{run}\",\"item\":\"{item}\",\"turn\":{turn},\"tool\":\"{tool}\",\"promptTokens\":{tokens},\"msg\":\"turn finished\"}}",
                now,
                g.int(1, 60),
                g.hex(5)
            ),
        };
        t.line(line);
    }
}

fn openai_429(g: &mut Gen, quota: bool) -> Out {
    let model = g.pick(OPENAI_MODELS);
    let (text, kind, code) = openai_429_error(g, quota, model);
    let run = format!("run_{}", g.hex(10));
    let item = format!("item-{}", g.int(1, 4000));
    let request = format!("req_{}", g.hex(32));
    let mut t = Text::default();
    match g.below(3) {
        // Python: logging lines, httpx's and the SDK's retries, then the
        // exception, its traceback apart.
        0 => {
            agent_log_prelude(g, &mut t, 0, &run, &item, model);
            for _ in 0..g.int(0, 2) {
                t.line("INFO:httpx:HTTP Request: POST https://api.openai.com/v1/chat/completions \"HTTP/1.1 429 Too Many Requests\"");
                t.line(format!(
                    "INFO:openai._base_client:Retrying request to /chat/completions in {}.{:06} seconds",
                    g.int(0, 8),
                    g.int(0, 999_999)
                ));
            }
            t.line("INFO:httpx:HTTP Request: POST https://api.openai.com/v1/chat/completions \"HTTP/1.1 429 Too Many Requests\"");
            let py = g.pick(&["3.11", "3.12", "3.12", "3.13"]);
            let site = format!("/usr/local/lib/python{py}/site-packages/openai");
            let exception = format!(
                "openai.RateLimitError: Error code: 429 - {{'error': {{'message': '{text}', 'type': '{kind}', 'param': None, 'code': '{code}'}}}}"
            );
            t.line(&exception);
            let mut trace = Text::default();
            trace.line("Traceback (most recent call last):");
            trace.line("  File \"/app/agent/runner.py\", line 212, in run_turn");
            trace.line("    response = self.client.chat.completions.create(");
            trace.line("               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^");
            trace.line(format!(
                "  File \"{site}/_utils/_utils.py\", line {}, in wrapper",
                g.pick(&[275, 279, 287])
            ));
            trace.line("    return func(*args, **kwargs)");
            trace.line("           ^^^^^^^^^^^^^^^^^^^^^");
            trace.line(format!(
                "  File \"{site}/resources/chat/completions{}.py\", line {}, in create",
                g.pick(&["", "/completions"]),
                g.int(820, 1150)
            ));
            trace.line("    return self._post(");
            trace.line("           ^^^^^^^^^^^");
            trace.line(format!(
                "  File \"{site}/_base_client.py\", line {}, in post",
                g.int(1230, 1290)
            ));
            trace.line("    return cast(ResponseT, self.request(cast_to, opts, stream=stream, stream_cls=stream_cls))");
            trace.line("                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^");
            trace.line(format!(
                "  File \"{site}/_base_client.py\", line {}, in request",
                g.int(1020, 1060)
            ));
            trace.line("    raise self._make_status_error_from_response(err.response) from None");
            trace.line(&exception);
            return Out::traced(t, trace);
        }
        // Go: logfmt, the SDK's error in `err`.
        1 => {
            agent_log_prelude(g, &mut t, 1, &run, &item, model);
            for attempt in 1..=g.int(0, 3) {
                let ts = g.timestamp();
                t.line(format!(
                    "time={ts} level=WARN msg=\"model call failed, retrying\" run={run} attempt={attempt} status=429 retry_after={}s x_request_id={}",
                    g.int(1, 30),
                    format_args!("req_{}", g.hex(32))
                ));
            }
            let ts = g.timestamp();
            let json = format!(
                "{{\\n    \\\"message\\\": \\\"{text}\\\",\\n    \\\"type\\\": \\\"{kind}\\\",\\n    \\\"param\\\": null,\\n    \\\"code\\\": \\\"{code}\\\"\\n  }}"
            );
            t.line(format!(
                "time={ts} level=ERROR msg=\"agent run failed\" run={run} item={item} model={model} err=\"chat completion: POST \\\"https://api.openai.com/v1/chat/completions\\\": 429 Too Many Requests {json}\" x_request_id={request}"
            ));
        }
        // Node: pino's JSON lines, the error object with its stack.
        _ => {
            agent_log_prelude(g, &mut t, 2, &run, &item, model);
            g.timestamp();
            let now = g.clock;
            let stack = format!(
                "Error: 429 {text}\\n    at APIError.generate (/app/node_modules/openai/error.js:{}:20)\\n    at OpenAI.makeStatusError (/app/node_modules/openai/core.js:{}:33)\\n    at OpenAI.makeRequest (/app/node_modules/openai/core.js:{}:30)\\n    at process.processTicksAndRejections (node:internal/process/task_queues:105:5)\\n    at async AgentLoop.callModel (/app/dist/agent/loop.js:148:26)\\n    at async AgentLoop.run (/app/dist/agent/loop.js:87:28)",
                g.pick(&[63, 65, 72]),
                g.pick(&[293, 323, 331]),
                g.pick(&[337, 367, 375])
            );
            t.line(format!(
                "{{\"level\":50,\"time\":{},\"pid\":{},\"hostname\":\"agent-worker-{}\",\"run\":\"{run}\",\"item\":\"{item}\",\"err\":{{\"type\":\"RateLimitError\",\"message\":\"429 {text}\",\"stack\":\"{stack}\",\"status\":429,\"headers\":{{\"x-request-id\":\"{request}\",\"retry-after\":\"{}\"}},\"request_id\":\"{request}\",\"error\":{{\"message\":\"{text}\",\"type\":\"{kind}\",\"param\":null,\"code\":\"{code}\"}},\"code\":\"{code}\",\"param\":null,\"type\":\"{kind}\"}},\"msg\":\"model call failed\"}}",
                now,
                g.int(1, 60),
                g.hex(5),
                g.int(1, 60)
            ));
        }
    }
    Out::plain(t)
}

// -- Helm: an upgrade refused (another operation) against one timed out -----

const HELM_RELEASES: &[(&str, &str)] = &[
    ("orders-api", "Deployment"),
    ("billing-worker", "Deployment"),
    ("web-frontend", "Deployment"),
    ("notifications", "Deployment"),
    ("search-indexer", "StatefulSet"),
];

fn helm_upgrade(g: &mut Gen, deadline: bool) -> Out {
    let (release, kind) = g.pick(HELM_RELEASES);
    let namespace = match g.below(4) {
        0 => "prod".to_string(),
        1 => "staging".to_string(),
        2 => format!("preview-pr-{}", g.int(100, 4000)),
        _ => "default".to_string(),
    };
    let timeout = g.pick(&["5m0s", "10m0s", "300s", "15m"]);
    let sha = g.hex(40);
    let atomic = g.chance(30);
    let debug = g.chance(55);
    // Two helm releases: the debug lines' source lines differ.
    let old = g.chance(50);
    let at = |new: u32, before: u32| if old { before } else { new };
    let command = format!(
        "helm upgrade --install {release} ./charts/{release} -n {namespace} -f charts/{release}/values-{}.yaml --set image.tag={} --wait --timeout {timeout}{}{}",
        if namespace.starts_with("preview") { "preview" } else { namespace.as_str() },
        &sha[..12],
        if atomic { " --atomic" } else { "" },
        if debug { " --debug" } else { "" }
    );
    let mut body = Text::default();
    if g.chance(40) {
        body.line(format!(
            "Switched to context \"{}\".",
            g.pick(&[
                "prod-eu-west-1",
                "gke_acme-prod_europe-west4_main",
                "arn:aws:eks:us-east-1:123456789012:cluster/main"
            ])
        ));
    }
    if g.chance(50) {
        body.line("WARNING: Kubernetes configuration file is group-readable. This is insecure. Location: /home/runner/.kube/config");
    }
    if debug {
        body.line(format!(
            "history.go:56: [debug] getting history for release {release}"
        ));
        body.line(format!(
            "upgrade.go:{}: [debug] preparing upgrade for {release}",
            at(164, 144)
        ));
    }
    if !deadline {
        let error =
            "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress";
        body.line(g.paint("31", error));
        if debug {
            body.line(
                "helm.go:84: [debug] another operation (install/upgrade/rollback) is in progress",
            );
            body.line("helm.sh/helm/v3/pkg/action.init");
            body.line("\thelm.sh/helm/v3/pkg/action/action.go:65");
            body.line("runtime.doInit1");
            body.line(format!("\truntime/proc.go:{}", at(7290, 7144)));
            body.line("runtime.doInit");
            body.line(format!("\truntime/proc.go:{}", at(7093, 7067)));
            body.line("runtime.main");
            body.line(format!("\truntime/proc.go:{}", at(271, 267)));
            body.line("runtime.goexit");
            body.line(format!("\truntime/asm_amd64.s:{}", at(1700, 1695)));
            body.line("UPGRADE FAILED");
            body.line("main.newUpgradeCmd.func2");
            body.line(format!(
                "\thelm.sh/helm/v3/cmd/helm/upgrade.go:{}",
                at(215, 203)
            ));
            body.line("github.com/spf13/cobra.(*Command).execute");
            body.line(format!(
                "\tgithub.com/spf13/cobra@v1.{}/command.go:{}",
                at(9, 8),
                at(1019, 983)
            ));
            body.line("main.main");
            body.line("\thelm.sh/helm/v3/cmd/helm/helm.go:83");
        }
        if g.chance(40) {
            let revision = g.int(2, 300);
            body.line("REVISION\tUPDATED                 \tSTATUS         \tCHART            \tAPP VERSION\tDESCRIPTION");
            body.line(format!(
                "{revision}\t{}\tpending-upgrade\t{release}-{}\t{}  \tPreparing upgrade",
                wall_clock(g),
                g.version(),
                &g.hex(12)
            ));
        }
        return Out::plain(ci_step(g, &command, 1, &body));
    }
    let resources = g.int(4, 12);
    let want = g.int(2, 6);
    if debug {
        body.line(format!(
            "upgrade.go:{}: [debug] performing update for {release}",
            at(172, 152)
        ));
        body.line(format!(
            "upgrade.go:{}: [debug] creating upgraded release for {release}",
            at(360, 340)
        ));
        body.line(format!(
            "client.go:{}: [debug] checking {resources} resources for changes",
            at(399, 393)
        ));
        for _ in 0..g.int(0, 4) {
            body.line(format!(
                "client.go:{}: [debug] Looks like there are no changes for {} \"{release}{}\"",
                at(690, 684),
                g.pick(&[
                    "Service",
                    "ConfigMap",
                    "ServiceAccount",
                    "PodDisruptionBudget"
                ]),
                g.pick(&["", "-config", "-metrics"])
            ));
        }
        body.line(format!(
            "wait.go:{}: [debug] beginning wait for {resources} resources with timeout of {timeout}",
            at(50, 48)
        ));
        let polls = g.int(3, 40);
        let mut ready = 0;
        for _ in 0..polls {
            if ready + 1 < want && g.chance(10) {
                ready += 1;
            }
            body.line(format!(
                "ready.go:{}: [debug] {kind} is not ready: {namespace}/{release}. {ready} out of {want} expected pods are ready",
                at(303, 277)
            ));
        }
    }
    let cause = g.pick(&[
        "context deadline exceeded",
        "context deadline exceeded",
        "timed out waiting for the condition",
    ]);
    if debug {
        body.line(format!(
            "upgrade.go:{}: [debug] warning: Upgrade \"{release}\" failed: {cause}",
            at(477, 434)
        ));
    }
    let error = if atomic {
        if debug {
            body.line(format!("upgrade.go:{}: [debug] Upgrade failed and atomic is set, rolling back to last successful release", at(507, 487)));
            body.line(format!(
                "history.go:56: [debug] getting history for release {release}"
            ));
            body.line(format!(
                "rollback.go:{}: [debug] preparing rollback of {release}",
                at(75, 64)
            ));
            body.line(format!(
                "rollback.go:{}: [debug] creating rolled back release for {release}",
                at(146, 130)
            ));
            body.line(format!(
                "rollback.go:{}: [debug] performing rollback of {release}",
                at(173, 156)
            ));
        }
        format!("Error: UPGRADE FAILED: release {release} failed, and has been rolled back due to atomic being set: {cause}")
    } else {
        format!("Error: UPGRADE FAILED: {cause}")
    };
    body.line(g.paint("31", &error));
    if debug {
        body.line(format!("helm.go:84: [debug] {cause}"));
    }
    Out::plain(ci_step(g, &command, 1, &body))
}

// -- pre-commit: ruff's findings against black's reformatting ---------------

/// pre-commit's `name.....Status` lines, 79 columns.
fn hook_line(g: &Gen, name: &str, status: &str) -> String {
    let (label, painted) = match status {
        "Passed" => (status.to_string(), g.paint("42", status)),
        "Failed" => (status.to_string(), g.paint("41", status)),
        _ => (
            format!("(no files to check){status}"),
            format!(
                "{}{}",
                g.paint("30;46", "(no files to check)"),
                g.paint("30;43", status)
            ),
        ),
    };
    let dots = 79usize.saturating_sub(name.len() + label.len()).max(3);
    format!("{name}{}{painted}", ".".repeat(dots))
}

const PY_FILES: &[&str] = &[
    "src/billing/invoices.py",
    "src/billing/tax.py",
    "app/api/routes/orders.py",
    "services/ingest/consumer.py",
    "src/accounts/models.py",
    "tools/backfill_refunds.py",
];

fn ruff_finding(g: &mut Gen, file: &str) -> (u64, String, bool) {
    let line = g.int(1, 400);
    let col = g.int(1, 60);
    let (text, fixable) = match g.below(8) {
        0 => (
            format!(
                "F401 [*] `{}` imported but unused",
                g.pick(&[
                    "os",
                    "datetime.timezone",
                    "typing.Optional",
                    "json",
                    "decimal.ROUND_HALF_UP",
                    "sqlalchemy.orm.joinedload"
                ])
            ),
            true,
        ),
        1 => (
            format!(
                "F841 Local variable `{}` is assigned to but never used",
                g.pick(&["total", "resp", "exc", "rows", "tax_rate"])
            ),
            false,
        ),
        2 => (
            format!("E501 Line too long ({} > 88)", g.int(89, 140)),
            false,
        ),
        3 => (
            "I001 [*] Import block is un-sorted or un-formatted".to_string(),
            true,
        ),
        4 => (
            "B006 Do not use mutable data structures for argument defaults".to_string(),
            false,
        ),
        5 => (
            "UP007 [*] Use `X | Y` for type annotations".to_string(),
            true,
        ),
        6 => (
            format!(
                "F811 Redefinition of unused `{}` from line {}",
                g.pick(&["parse_amount", "Invoice", "get_session"]),
                g.int(1, line.max(2) - 1)
            ),
            false,
        ),
        _ => (
            "E711 Comparison to `None` should be `cond is None`".to_string(),
            true,
        ),
    };
    (line, format!("{file}:{line}:{col}: {text}"), fixable)
}

fn pre_commit(g: &mut Gen, black: bool) -> Out {
    let file = g.pick(PY_FILES);
    let mut body = Text::default();
    if g.chance(35) {
        for repo in [
            "https://github.com/pre-commit/pre-commit-hooks",
            "https://github.com/psf/black-pre-commit-mirror",
            "https://github.com/astral-sh/ruff-pre-commit",
        ] {
            body.line(format!("[INFO] Initializing environment for {repo}."));
        }
        for repo in [
            "https://github.com/pre-commit/pre-commit-hooks",
            "https://github.com/psf/black-pre-commit-mirror",
            "https://github.com/astral-sh/ruff-pre-commit",
        ] {
            body.line(format!("[INFO] Installing environment for {repo}."));
            body.line("[INFO] Once installed this environment will be reused.");
            body.line("[INFO] This may take a few minutes...");
        }
    }
    let ruff_first = g.chance(50);
    let mut hooks: Vec<&str> = vec![
        "trim trailing whitespace",
        "fix end of files",
        "check yaml",
        "check for added large files",
    ];
    if g.chance(50) {
        hooks.push("check for merge conflicts");
    }
    if g.chance(40) {
        hooks.push("debug statements (python)");
    }
    if ruff_first {
        hooks.extend(["ruff", "black"]);
    } else {
        hooks.extend(["black", "ruff"]);
    }
    if g.chance(50) {
        hooks.push("mypy");
    }
    if g.chance(30) {
        hooks.push("shellcheck");
    }
    let mut diff = false;
    for hook in hooks {
        let failed = (hook == "black") == black && (hook == "black" || hook == "ruff");
        if !failed {
            let status = if (hook == "shellcheck" || hook == "check yaml") && g.chance(30) {
                "Skipped"
            } else {
                "Passed"
            };
            body.line(hook_line(g, hook, status));
            continue;
        }
        body.line(hook_line(g, hook, "Failed"));
        let hook_id = g.paint("2", &format!("- hook id: {hook}"));
        body.line(hook_id);
        if black {
            body.line(g.paint("2", "- files were modified by this hook"));
            body.line("");
            let others = g.int(0, 2);
            let mut files = vec![file];
            for _ in 0..others {
                let other = g.pick(PY_FILES);
                if !files.contains(&other) {
                    files.push(other);
                }
            }
            for f in &files {
                body.line(format!("reformatted {f}"));
            }
            body.line("");
            body.line("All done! ✨ 🍰 ✨");
            let n = files.len();
            body.line(format!(
                "{n} file{} reformatted, {} files left unchanged.",
                if n == 1 { "" } else { "s" },
                g.int(20, 400)
            ));
            diff = true;
        } else {
            let with_fix = g.chance(35);
            body.line(g.paint("2", "- exit code: 1"));
            if with_fix {
                body.line(g.paint("2", "- files were modified by this hook"));
            }
            body.line("");
            let count = g.int(1, 6);
            let mut fixable = 0;
            let mut remaining = 0;
            let mut findings: Vec<_> = (0..count).map(|_| ruff_finding(g, file)).collect();
            findings.sort();
            for (_, finding, fix) in findings {
                if with_fix && fix {
                    fixable += 1;
                    continue;
                }
                remaining += 1;
                fixable += u64::from(fix);
                body.line(finding);
            }
            if with_fix {
                if remaining == 0 {
                    // What --fix could not fix is what fails the hook.
                    let (_, finding, _) = ruff_finding(g, file);
                    body.line(finding.replace(" [*]", ""));
                    remaining = 1;
                }
                body.line(format!(
                    "Found {} error{} ({fixable} fixed, {remaining} remaining).",
                    fixable + remaining,
                    if fixable + remaining == 1 { "" } else { "s" }
                ));
                diff = fixable > 0;
            } else {
                body.line(format!(
                    "Found {count} error{}.",
                    if count == 1 { "" } else { "s" }
                ));
                if fixable > 0 {
                    body.line(format!("[*] {fixable} fixable with the `--fix` option."));
                }
            }
        }
        body.line("");
    }
    let show_diff = g.chance(50);
    if show_diff && diff {
        body.line("pre-commit hook(s) made changes.");
        body.line("If you are seeing this message in CI, reproduce locally with: `pre-commit run --all-files`.");
        body.line("To run `pre-commit` as part of git workflow, use `pre-commit install`.");
        body.line("All changes made by hooks:");
        let index = format!("{}..{}", g.hex(7), g.hex(7));
        body.line(format!("diff --git a/{file} b/{file}"));
        body.line(format!("index {index} 100644"));
        body.line(format!("--- a/{file}"));
        body.line(format!("+++ b/{file}"));
        let at = g.int(10, 300);
        let func = g.pick(&[
            "render_invoice",
            "apply_tax",
            "handle_order",
            "consume",
            "backfill",
        ]);
        body.line(format!("@@ -{at},7 +{at},9 @@ def {func}("));
        body.line("-    lines = [format_line(l, currency) for l in invoice.lines if l.amount>0]");
        body.line("+    lines = [");
        body.line("+        format_line(l, currency) for l in invoice.lines if l.amount > 0");
        body.line("+    ]");
    }
    let command = if show_diff {
        "pre-commit run --all-files --show-diff-on-failure"
    } else {
        g.pick(&[
            "pre-commit run --all-files",
            "pre-commit run --from-ref origin/main --to-ref HEAD",
        ])
    };
    Out::plain(ci_step(g, command, 1, &body))
}

// -- CMake: a compile error against an undefined reference, one build -------

const CPP_SOURCES: &[&str] = &[
    "src/orders/cart.cpp",
    "src/orders/inventory.cpp",
    "src/orders/money.cpp",
    "src/http/server.cpp",
    "src/http/router.cpp",
    "src/storage/pg_pool.cpp",
    "src/storage/migrations.cpp",
    "src/util/strings.cpp",
    "src/util/clock.cpp",
];

/// gcc's and clang's `path:line:col: error: ` head, in their colours.
fn cc_diagnostic(g: &Gen, location: &str, kind: &str, text: &str) -> String {
    if g.color {
        let code = if kind == "error" {
            "01;31"
        } else if kind == "warning" {
            "01;35"
        } else {
            "01;36"
        };
        format!(
            "\x1b[01m\x1b[K{location}:\x1b[m\x1b[K \x1b[{code}m\x1b[K{kind}: \x1b[m\x1b[K{text}"
        )
    } else {
        format!("{location}: {kind}: {text}")
    }
}

fn cmake_build(g: &mut Gen, link: bool) -> Out {
    let mac = g.chance(30);
    let ninja = g.chance(40);
    let root = if mac {
        g.pick(&[
            "/Users/runner/work/orders/orders",
            "/Users/ci/builds/orders",
        ])
    } else {
        g.pick(&[
            "/home/runner/work/orders/orders",
            "/builds/acme/orders",
            "/work",
            "/workspace/orders",
        ])
    };
    let make = if mac {
        "make"
    } else {
        g.pick(&["make", "gmake"])
    };
    let jobs = g.pick(&[2, 4, 8, 16]);
    let mut body = Text::default();
    if g.chance(40) {
        body.line(format!(
            "-- The CXX compiler identification is {}",
            if mac {
                format!("AppleClang 15.0.0.{}", g.int(15000000, 15000400))
            } else {
                format!("GNU {}.{}.0", g.int(11, 14), g.int(1, 3))
            }
        ));
        body.line("-- Detecting CXX compiler ABI info");
        body.line("-- Detecting CXX compiler ABI info - done");
        body.line(format!(
            "-- Found PostgreSQL: /usr/lib/{}libpq.so (found version \"{}.{}\")",
            if mac { "" } else { "x86_64-linux-gnu/" },
            g.int(14, 17),
            g.int(0, 5)
        ));
        body.line(format!(
            "-- Configuring done ({}.{}s)",
            g.int(0, 4),
            g.int(0, 9)
        ));
        body.line(format!("-- Generating done (0.0{}s)", g.int(1, 9)));
        body.line(format!("-- Build files have been written to: {root}/build"));
    }
    let mut sources: Vec<&str> = CPP_SOURCES.to_vec();
    g.shuffle(&mut sources);
    let before = if link {
        sources.len()
    } else {
        g.below(sources.len())
    };
    let steps = sources.len() + 5;
    let mut step = 0;
    let progress = |step: usize| format!("[{:>3}%]", step * 100 / steps);
    for source in &sources[..before] {
        step += 1;
        let object = format!("CMakeFiles/orders_core.dir/{source}.o");
        if ninja {
            body.line(format!("[{step}/{steps}] Building CXX object {object}"));
        } else {
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint("32", &format!("Building CXX object {object}"))
            ));
        }
        if g.chance(12) {
            let location = format!("{root}/{source}:{}:{}", g.int(10, 300), g.int(5, 40));
            let variable = g.pick(&["n", "rc", "it", "start"]);
            let function = g.pick(&[
                "void orders::log_slow(std::string_view)",
                "int storage::apply(const std::vector<std::string>&)",
            ]);
            if !mac {
                body.line(format!("{root}/{source}: In function '{function}':"));
            }
            body.line(cc_diagnostic(
                g,
                &location,
                "warning",
                &format!("unused variable '{variable}' [-Wunused-variable]"),
            ));
        }
    }
    let pricing = format!("{root}/src/orders/pricing.cpp");
    let code;
    if !link {
        step += 1;
        let object = "CMakeFiles/orders_core.dir/src/orders/pricing.cpp.o";
        if ninja {
            body.line(format!("[{step}/{steps}] Building CXX object {object}"));
            body.line(format!("FAILED: {object} "));
            body.line(format!(
                "{} -DORDERS_VERSION=\\\"{}\\\" -I{root}/include -I{root}/src -O2 -g -DNDEBUG -std=gnu++20 -Wall -Wextra -MD -MT {object} -MF {object}.d -o {object} -c {pricing}",
                if mac { "/Applications/Xcode_15.4.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/bin/c++" } else { "/usr/bin/c++" },
                g.version()
            ));
        } else {
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint("32", &format!("Building CXX object {object}"))
            ));
        }
        let location = format!("{pricing}:87:23");
        if mac {
            body.line(cc_diagnostic(g, &location, "error", "no member named 'discount_cents' in 'orders::LineItem'; did you mean 'discount_bps'?"));
        } else {
            body.line(format!("{pricing}: In member function 'int64_t orders::Pricing::total(const orders::Cart&) const':"));
            body.line(cc_diagnostic(g, &location, "error", "'const struct orders::LineItem' has no member named 'discount_cents'; did you mean 'discount_bps'?"));
        }
        body.line("   87 |         sum += item.discount_cents * item.quantity;");
        body.line("      |                     ^~~~~~~~~~~~~~");
        body.line("      |                     discount_bps");
        if mac {
            body.line(cc_diagnostic(
                g,
                &format!("{root}/include/orders/line_item.h:19:13"),
                "note",
                "'discount_bps' declared here",
            ));
            body.line("   19 |     int32_t discount_bps = 0;");
            body.line("      |             ^");
            body.line("1 error generated.");
        }
        // Other jobs still running when make stops.
        if !ninja {
            for source in &sources[before..sources.len().min(before + g.below(3))] {
                step += 1;
                body.line(format!(
                    "{} {}",
                    progress(step),
                    g.paint(
                        "32",
                        &format!("Building CXX object CMakeFiles/orders_core.dir/{source}.o")
                    )
                ));
            }
            body.line(format!(
                "{make}[2]: *** [CMakeFiles/orders_core.dir/build.make:{}: {object}] Error 1",
                g.pick(&[104, 118, 132])
            ));
            body.line(format!("{make}[2]: *** Waiting for unfinished jobs...."));
            body.line(format!(
                "{make}[1]: *** [CMakeFiles/Makefile2:{}: CMakeFiles/orders_core.dir/all] Error 2",
                g.pick(&[112, 139])
            ));
            body.line(format!(
                "{make}: *** [Makefile:{}: all] Error 2",
                g.pick(&[136, 146, 156])
            ));
            code = 2;
        } else {
            body.line("ninja: build stopped: subcommand failed.");
            code = 1;
        }
    } else {
        step += 1;
        if ninja {
            body.line(format!("[{step}/{steps}] Building CXX object CMakeFiles/orders_core.dir/src/orders/pricing.cpp.o"));
            step += 1;
            body.line(format!(
                "[{step}/{steps}] Linking CXX static library liborders_core.a"
            ));
            step += 1;
            body.line(format!(
                "[{step}/{steps}] Building CXX object CMakeFiles/orders_service.dir/src/main.cpp.o"
            ));
            step += 1;
            body.line(format!(
                "[{step}/{steps}] Linking CXX executable orders_service"
            ));
            body.line("FAILED: orders_service ");
            body.line(format!(": && {} -O2 -g -DNDEBUG CMakeFiles/orders_service.dir/src/main.cpp.o -o orders_service  liborders_core.a  -lpq  -lpthread && :", "/usr/bin/c++"));
        } else {
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint(
                    "32",
                    "Building CXX object CMakeFiles/orders_core.dir/src/orders/pricing.cpp.o"
                )
            ));
            step += 1;
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint("32;1", "Linking CXX static library liborders_core.a")
            ));
            body.line(format!("{} Built target orders_core", progress(step)));
            step += 1;
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint(
                    "32",
                    "Building CXX object CMakeFiles/orders_service.dir/src/main.cpp.o"
                )
            ));
            step += 1;
            body.line(format!(
                "{} {}",
                progress(step),
                g.paint("32;1", "Linking CXX executable orders_service")
            ));
        }
        if mac {
            let arch = g.pick(&["arm64", "arm64", "x86_64"]);
            body.line(format!("Undefined symbols for architecture {arch}:"));
            body.line("  \"orders::TaxTable::rate_for(std::__1::basic_string<char, std::__1::char_traits<char>, std::__1::allocator<char>> const&) const\", referenced from:");
            body.line("      orders::Pricing::total(orders::Cart const&) const in liborders_core.a[3](pricing.cpp.o)");
            if g.chance(50) {
                body.line("      _main in main.cpp.o");
            }
            body.line(format!("ld: symbol(s) not found for architecture {arch}"));
            let text = "linker command failed with exit code 1 (use -v to see invocation)";
            body.line(format!(
                "c++: {}",
                if g.color {
                    format!("\x1b[0;1;31merror: \x1b[0m\x1b[1m{text}\x1b[0m")
                } else {
                    format!("error: {text}")
                }
            ));
        } else {
            let symbol = "orders::TaxTable::rate_for(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&) const";
            if g.chance(50) {
                body.line("/usr/bin/ld: CMakeFiles/orders_service.dir/src/main.cpp.o: in function `main':");
                body.line(format!(
                    "main.cpp:(.text.startup+0x{}): undefined reference to `{symbol}'",
                    g.hex(3)
                ));
            }
            body.line("/usr/bin/ld: liborders_core.a(pricing.cpp.o): in function `orders::Pricing::total(orders::Cart const&) const':");
            body.line(format!(
                "pricing.cpp:(.text+0x{}): undefined reference to `{symbol}'",
                g.hex(3)
            ));
            body.line("collect2: error: ld returned 1 exit status");
        }
        if ninja {
            body.line("ninja: build stopped: subcommand failed.");
            code = 1;
        } else {
            body.line(format!("{make}[2]: *** [CMakeFiles/orders_service.dir/build.make:{}: orders_service] Error 1", g.pick(&[98, 112])));
            body.line(format!("{make}[1]: *** [CMakeFiles/Makefile2:{}: CMakeFiles/orders_service.dir/all] Error 2", g.pick(&[165, 203])));
            body.line(format!(
                "{make}: *** [Makefile:{}: all] Error 2",
                g.pick(&[136, 146, 156])
            ));
            code = 2;
        }
    }
    let flags = match g.below(4) {
        0 => format!("-j {jobs}"),
        1 => format!("--parallel {jobs}"),
        2 => "-- -k".to_string(),
        _ => format!("--config Release -j{jobs}"),
    };
    let command = format!("cmake --build build {flags}");
    Out::plain(ci_step(g, &command, code, &body))
}

// -- Xcode: an XCTest assertion ---------------------------------------------

const XC_TESTS: &[(&str, &[&str])] = &[
    (
        "CartTests",
        &[
            "testTotalIncludesTax",
            "testRemovingLastItemEmptiesCart",
            "testBulkDiscountAppliesAtTen",
        ],
    ),
    (
        "CheckoutViewModelTests",
        &[
            "testApplyingCouponReducesTotal",
            "testPlaceOrderDisabledWithoutAddress",
        ],
    ),
    (
        "PriceFormatterTests",
        &[
            "testFormatsEuroWithComma",
            "testRoundsHalfEven",
            "testJapaneseYenHasNoDecimals",
        ],
    ),
    (
        "OrderSyncTests",
        &["testSyncRetriesAfterTimeout", "testConflictKeepsServerCopy"],
    ),
];

fn xctest_assertion(g: &mut Gen) -> String {
    match g.below(5) {
        0 => {
            let want = g.int(1, 500);
            format!(
                "XCTAssertEqual failed: (\"{}.0\") is not equal to (\"{}.5\")",
                want, want
            )
        }
        1 => format!(
            "XCTAssertEqual failed: (\"€{},{:02}\") is not equal to (\"€{}.{:02}\")",
            g.int(1, 999),
            g.int(0, 99),
            g.int(1, 999),
            g.int(0, 99)
        ),
        2 => format!(
            "XCTAssertTrue failed - {}",
            g.pick(&[
                "cart should be empty",
                "button should be disabled",
                "expected a retry"
            ])
        ),
        3 => format!(
            "XCTAssertNil failed: \"Optional(Shop.SyncError.conflict(serverVersion: {}))\"",
            g.int(1, 90)
        ),
        _ => format!(
            "XCTAssertEqual failed: (\"{}\") is not equal to (\"{}\") - item count",
            g.int(0, 9),
            g.int(10, 30)
        ),
    }
}

fn xcodebuild_test(g: &mut Gen) -> Out {
    let xcode = g.pick(&["15.4", "16.1", "16.2", "16.4"]);
    let device = g.pick(&[
        "iPhone 15",
        "iPhone 16 Pro",
        "iPad Air 11-inch (M2)",
        "iPhone SE (3rd generation)",
    ]);
    let os = g.pick(&["17.5", "18.1", "18.2", "18.5"]);
    let root = g.pick(&[
        "/Users/runner/work/shop-ios/shop-ios",
        "/Users/ci/agent/work/shop-ios",
        "/Volumes/ci/shop-ios",
    ]);
    let command = format!(
        "xcodebuild test -scheme Shop -destination 'platform=iOS Simulator,name={device},OS={os}' -resultBundlePath TestResults.xcresult"
    );
    let mut body = Text::default();
    body.line("Command line invocation:");
    body.line(format!(
        "    /Applications/Xcode_{xcode}.app/Contents/Developer/usr/bin/{}",
        &command
    ));
    body.line("");
    if g.chance(40) {
        body.line("--- xcodebuild: WARNING: Using the first of multiple matching destinations:");
        body.line(format!(
            "{{ platform:iOS Simulator, id:{}, OS:{os}, name:{device} }}",
            g.uuid().to_uppercase()
        ));
        body.line(format!(
            "{{ platform:iOS Simulator, id:{}, OS:{os}, name:{device} }}",
            g.uuid().to_uppercase()
        ));
        body.line("");
    }
    let xcbeautify = g.chance(30);
    let failing: Vec<(&str, &str, String, u64)> = {
        let n = if g.chance(75) { 1 } else { 2 };
        (0..n)
            .map(|_| {
                let (class, methods) = g.pick(XC_TESTS);
                let method = g.pick(methods);
                (class, method, xctest_assertion(g), g.int(14, 220))
            })
            .collect()
    };
    let mut executed = 0;
    let stamp = |g: &mut Gen| {
        let ts = g.timestamp();
        format!("{} {}", &ts[..10], &ts[11..23])
    };
    let mut suites: Vec<&str> = XC_TESTS.iter().map(|(c, _)| *c).collect();
    g.shuffle(&mut suites);
    if !xcbeautify {
        let ts = stamp(g);
        body.line(format!("Test Suite 'All tests' started at {ts}."));
        let ts = stamp(g);
        body.line(format!("Test Suite 'ShopTests.xctest' started at {ts}."));
    }
    for suite in suites {
        let (_, methods) = XC_TESTS
            .iter()
            .find(|(c, _)| *c == suite)
            .copied()
            .unwrap_or(XC_TESTS[0]);
        let ts = stamp(g);
        if xcbeautify {
            body.line(format!("Test Suite {suite} started"));
        } else {
            body.line(format!("Test Suite '{suite}' started at {ts}."));
        }
        let mut failures = 0;
        let mut run = 0;
        for method in methods {
            run += 1;
            let took = format!("0.{:03}", g.int(1, 900));
            let failure = failing
                .iter()
                .find(|(c, m, _, _)| *c == suite && m == method);
            if xcbeautify {
                match failure {
                    Some((_, _, text, _)) => {
                        failures += 1;
                        body.line(format!("    {} {method}, {text}", g.paint("31", "✖")));
                    }
                    None => body.line(format!(
                        "    {} {method} ({took} seconds)",
                        g.paint("32", "✔")
                    )),
                }
                continue;
            }
            body.line(format!(
                "Test Case '-[ShopTests.{suite} {method}]' started."
            ));
            match failure {
                Some((_, _, text, line)) => {
                    failures += 1;
                    body.line(format!("{root}/ShopTests/{suite}.swift:{line}: error: -[ShopTests.{suite} {method}] : {text}"));
                    body.line(format!(
                        "Test Case '-[ShopTests.{suite} {method}]' failed ({took} seconds)."
                    ));
                }
                None => body.line(format!(
                    "Test Case '-[ShopTests.{suite} {method}]' passed ({took} seconds)."
                )),
            }
        }
        executed += run;
        if !xcbeautify {
            let ts = stamp(g);
            let verdict = if failures > 0 { "failed" } else { "passed" };
            body.line(format!("Test Suite '{suite}' {verdict} at {ts}."));
            let secs = format!("0.{:03}", g.int(5, 999));
            body.line(format!(
                "\t Executed {run} test{}, with {failures} failure{} (0 unexpected) in {secs} ({secs}) seconds",
                if run == 1 { "" } else { "s" },
                if failures == 1 { "" } else { "s" }
            ));
        }
    }
    let failed = failing.len();
    if xcbeautify {
        body.line("");
        body.line(format!(
            "Tests Failed: {failed} failed, 0 skipped, {executed} total ({}.{:03} seconds)",
            g.int(0, 9),
            g.int(0, 999)
        ));
    } else {
        let ts = stamp(g);
        body.line(format!("Test Suite 'All tests' failed at {ts}."));
        body.line(format!("\t Executed {executed} tests, with {failed} failure{} (0 unexpected) in {}.{:03} seconds", if failed == 1 { "" } else { "s" }, g.int(0, 9), g.int(0, 999)));
        body.line("");
        let when = g.timestamp();
        body.line("Test session results, code coverage, and logs:");
        body.line(format!(
            "\t/Users/runner/Library/Developer/Xcode/DerivedData/Shop-{}/Logs/Test/Test-Shop-{}.{}.{}_{}-{}-{}-+0000.xcresult",
            alnum(g, 28).to_lowercase(),
            &when[0..4], &when[5..7], &when[8..10], &when[11..13], &when[14..16], &when[17..19]
        ));
        body.line("");
        body.line("Failing tests:");
        for (suite, method, _, _) in &failing {
            body.line(format!("\tShopTests.{suite}.{method}()"));
        }
        body.line("");
        body.line(g.paint("31", "** TEST FAILED **"));
    }
    Out::plain(ci_step(g, &command, 65, &body))
}

// -- Kafka: a consumer kicked out of its group, seen from its logs ----------

const KAFKA_TOPICS: &[&str] = &[
    "orders-events",
    "payments",
    "inventory-changes",
    "order-projections",
];

fn kafka_commit_failed(g: &mut Gen) -> Out {
    let group = g.pick(&[
        "orders-projector",
        "payments-ledger",
        "inventory-sync",
        "search-feeder",
    ]);
    let topic = g.pick(KAFKA_TOPICS);
    let n = g.int(1, 6);
    let client = format!("consumer-{group}-{n}");
    let member = format!("{client}-{}", g.uuid());
    let broker = if g.chance(50) {
        format!(
            "kafka-{}.kafka-headless.data.svc.cluster.local:9092",
            g.int(0, 2)
        )
    } else {
        format!("{}:9092", g.private_ip())
    };
    let thread = format!("{group}-consumer-{n}");
    let heartbeat = format!("kafka-coordinator-heartbeat-thread | {group}");
    let spring = g.chance(50);
    let pid = g.int(1, 60);
    let line = |g: &mut Gen, level: &str, thread: &str, logger: &str, short: &str, text: &str| {
        let ts = g.timestamp();
        if spring {
            let t: String = if thread.len() > 15 {
                thread[thread.len() - 15..].to_string()
            } else {
                format!("{thread:>15}")
            };
            format!(
                "{}Z {level:>5} {pid} --- [{t}] {short:<40} : {text}",
                &ts[..23]
            )
        } else {
            format!("{} [{thread}] {level:<5} {logger} - {text}", &ts[11..23])
        }
    };
    let prefix = format!("[Consumer clientId={client}, groupId={group}]");
    let mut t = Text::default();
    for _ in 0..g.int(0, 12) {
        let partition = g.int(0, 11);
        let records = g.int(1, 500);
        let ms = g.int(5, 4000);
        let l = line(
            g,
            "INFO",
            &thread,
            "com.acme.orders.consumer.OrderEventsConsumer",
            "c.a.orders.consumer.OrderEventsConsumer",
            &format!("Processed batch of {records} records from {topic}-{partition} in {ms} ms"),
        );
        t.line(l);
    }
    let max_poll = g.pick(&[300_000, 300_000, 600_000]);
    let text = format!("{prefix} consumer poll timeout has expired. This means the time between subsequent calls to poll() was longer than the configured max.poll.interval.ms, which typically implies that the poll loop is spending too much time processing messages. You can address this either by increasing max.poll.interval.ms or by reducing the maximum size of batches returned in poll() with max.poll.records.");
    let l = line(
        g,
        "WARN",
        &heartbeat,
        "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
        "o.a.k.c.c.internals.ConsumerCoordinator",
        &text,
    );
    t.line(l);
    let coordinator_id = 2_147_483_647 - g.int(0, 2);
    let text = format!("{prefix} Member {member} sending LeaveGroup request to coordinator {broker} (id: {coordinator_id} rack: null) due to consumer poll timeout has expired.");
    let l = line(
        g,
        "INFO",
        &heartbeat,
        "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
        "o.a.k.c.c.internals.ConsumerCoordinator",
        &text,
    );
    t.line(l);
    for text in [
        format!("{prefix} Resetting generation and member id due to: consumer pro-actively leaving the group"),
        format!("{prefix} Request joining group due to: consumer pro-actively leaving the group"),
    ] {
        if g.chance(70) {
            let l = line(g, "INFO", &heartbeat, "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator", "o.a.k.c.c.internals.ConsumerCoordinator", &text);
            t.line(l);
        }
    }
    let records = g.int(50, 500);
    let elapsed = max_poll + g.int(1000, 400_000);
    let text = format!(
        "Slow batch: {records} records took {elapsed} ms (max.poll.interval.ms={max_poll})"
    );
    if g.chance(60) {
        let l = line(
            g,
            "WARN",
            &thread,
            "com.acme.orders.consumer.OrderEventsConsumer",
            "c.a.orders.consumer.OrderEventsConsumer",
            &text,
        );
        t.line(l);
    }
    let partition = g.int(0, 11);
    let offset = g.int(10_000, 90_000_000);
    if g.chance(60) {
        let text = format!("{prefix} Offset commit failed on partition {topic}-{partition} at offset {offset}: The coordinator is not aware of this member.");
        let l = line(
            g,
            "ERROR",
            &thread,
            "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator",
            "o.a.k.c.c.internals.ConsumerCoordinator",
            &text,
        );
        t.line(l);
    }
    let text = format!(
        "Failed to commit offsets for {records} records of {topic}, they will be redelivered"
    );
    let l = line(
        g,
        "ERROR",
        &thread,
        "com.acme.orders.consumer.OrderEventsConsumer",
        "c.a.orders.consumer.OrderEventsConsumer",
        &text,
    );
    t.line(l);
    let exception = "org.apache.kafka.clients.consumer.CommitFailedException: Offset commit cannot be completed since the consumer is not part of an active group for auto partition assignment; it is likely that the consumer was kicked out of the group.";
    t.line(exception);
    // Kafka 3.6 to 3.8: the client's lines move.
    let v = g.below(3) as u64;
    let mut trace = Text::default();
    trace.line(exception);
    trace.line(format!("\tat org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.sendOffsetCommitRequest(ConsumerCoordinator.java:{})", 1351 + 11 * v));
    trace.line(format!("\tat org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.commitOffsetsSync(ConsumerCoordinator.java:{})", 1136 + 9 * v));
    if v == 2 {
        trace.line("\tat org.apache.kafka.clients.consumer.internals.LegacyKafkaConsumer.commitSync(LegacyKafkaConsumer.java:781)");
        trace.line("\tat org.apache.kafka.clients.consumer.KafkaConsumer.commitSync(KafkaConsumer.java:1034)");
    } else {
        trace.line(format!("\tat org.apache.kafka.clients.consumer.KafkaConsumer.commitSync(KafkaConsumer.java:{})", 1502 - 40 * v));
        trace.line(format!("\tat org.apache.kafka.clients.consumer.KafkaConsumer.commitSync(KafkaConsumer.java:{})", 1453 - 40 * v));
    }
    trace.line(
        "\tat com.acme.orders.consumer.OrderEventsConsumer.commit(OrderEventsConsumer.java:142)",
    );
    trace.line(
        "\tat com.acme.orders.consumer.OrderEventsConsumer.pollLoop(OrderEventsConsumer.java:97)",
    );
    trace
        .line("\tat com.acme.orders.consumer.OrderEventsConsumer.run(OrderEventsConsumer.java:71)");
    trace.line(format!(
        "\tat java.base/java.lang.Thread.run{}(Thread.java:{})",
        if g.chance(50) { "With" } else { "" },
        g.pick(&[840, 1583, 1596])
    ));
    Out::traced(t, trace)
}

// -- Flyway: an applied migration edited afterwards -------------------------

fn checksum(g: &mut Gen) -> i64 {
    let value = g.int(1, 2_147_483_647) as i64;
    if g.chance(50) {
        -value
    } else {
        value
    }
}

fn flyway_checksum(g: &mut Gen) -> Out {
    let version = g.pick(&["10.17.3", "10.20.1", "11.3.1", "9.22.3"]);
    let edition = if version.starts_with('9') {
        "Community"
    } else {
        "OSS"
    };
    let (url, engine) = if g.chance(70) {
        (
            format!(
                "jdbc:postgresql://{}:5432/{}",
                g.pick(&[
                    "db.internal",
                    "postgres",
                    "orders-db.cluster-c8x2.eu-west-1.rds.amazonaws.com",
                    "127.0.0.1"
                ]),
                g.pick(&["orders", "app", "ledger"])
            ),
            format!("PostgreSQL {}.{}", g.int(13, 17), g.int(0, 6)),
        )
    } else {
        (
            format!(
                "jdbc:mysql://{}:3306/{}",
                g.pick(&["mysql", "db.internal", "10.0.4.17"]),
                g.pick(&["orders", "shop"])
            ),
            format!("MySQL 8.{}", g.int(0, 4)),
        )
    };
    let mut mismatches: Vec<(u64, i64, i64)> = (0..if g.chance(75) { 1 } else { g.int(2, 3) })
        .map(|_| (g.int(2, 180), checksum(g), checksum(g)))
        .collect();
    mismatches.sort();
    mismatches.dedup_by_key(|m| m.0);
    let mut lines = vec!["Validate failed: Migrations have failed validation".to_string()];
    for (migration, applied, local) in &mismatches {
        lines.push(format!(
            "Migration checksum mismatch for migration version {migration}"
        ));
        lines.push(format!("-> Applied to database : {applied}"));
        lines.push(format!("-> Resolved locally    : {local}"));
    }
    lines.push(
        "Either revert the changes to the migration, or run repair to update the schema history."
            .to_string(),
    );
    lines.push(
        "Need more flexibility with validation rules? Learn more: https://rd.gt/3AbJUZE"
            .to_string(),
    );
    let mut body = Text::default();
    let command;
    if g.chance(60) {
        let docker = g.chance(40);
        if docker {
            if g.chance(40) {
                body.line(format!(
                    "Unable to find image 'flyway/flyway:{version}' locally"
                ));
                body.line(format!("{version}: Pulling from flyway/flyway"));
                for _ in 0..g.int(2, 7) {
                    body.line(format!("{}: Pull complete", g.hex(12)));
                }
                body.line(format!("Digest: sha256:{}", g.hex(64)));
                body.line(format!(
                    "Status: Downloaded newer image for flyway/flyway:{version}"
                ));
            }
            command = format!("docker run --rm --network host -v $PWD/db/migration:/flyway/sql flyway/flyway:{version} -url={url} -user=$DB_USER -password=*** migrate");
        } else {
            command = g
                .pick(&[
                    "flyway -configFiles=conf/flyway.conf migrate",
                    "flyway migrate -environment=ci",
                    "flyway -locations=filesystem:db/migration migrate",
                ])
                .to_string();
        }
        body.line(format!("Flyway {edition} Edition {version} by Redgate"));
        body.line("");
        body.line("See release notes here: https://rd.gt/416ObMi");
        body.line(format!("Database: {url} ({engine})"));
        body.line(format!("ERROR: {}", lines[0]));
        for l in &lines[1..] {
            body.line(l);
        }
    } else {
        let project = g.pick(&["orders-service", "ledger", "shop-backend"]);
        command = format!("./mvnw -B flyway:migrate -Dflyway.url={url}");
        for artifact in ["maven-plugin", "core", "database-postgresql"] {
            if g.chance(40) {
                body.line(format!("[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/org/flywaydb/flyway-{artifact}/{version}/flyway-{artifact}-{version}.jar ({} kB at {}.{} MB/s)", g.int(20, 900), g.int(0, 9), g.int(0, 9)));
            }
        }
        body.line("[INFO] ");
        body.line(format!(
            "[INFO] --- flyway:{version}:migrate (default-cli) @ {project} ---"
        ));
        body.line(format!(
            "[INFO] Flyway {edition} Edition {version} by Redgate"
        ));
        body.line(format!("[INFO] Database: {url} ({engine})"));
        body.line(
            "[INFO] ------------------------------------------------------------------------",
        );
        body.line(g.paint("1;31", "[INFO] BUILD FAILURE"));
        body.line(
            "[INFO] ------------------------------------------------------------------------",
        );
        body.line(format!("[INFO] Total time:  {} s", g.seconds(30)));
        body.line(format!("[INFO] Finished at: {}", &g.timestamp()[..19]));
        body.line(
            "[INFO] ------------------------------------------------------------------------",
        );
        body.line(format!("[ERROR] Failed to execute goal org.flywaydb:flyway-maven-plugin:{version}:migrate (default-cli) on project {project}: org.flywaydb.core.api.exception.FlywayValidateException: {}", lines[0]));
        for l in &lines[1..] {
            body.line(format!("[ERROR] {l}"));
        }
        body.line("[ERROR] -> [Help 1]");
        body.line("[ERROR] ");
        body.line(
            "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.",
        );
        body.line("[ERROR] Re-run Maven using the -X switch to enable full debug logging.");
        body.line("[ERROR] ");
        body.line("[ERROR] For more information about the errors and possible solutions, please read the following articles:");
        body.line("[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/MojoExecutionException");
    }
    Out::plain(ci_step(g, &command, 1, &body))
}

// -- Agents: an edit whose target text is not in the file -------------------

const EDIT_TARGETS: &[(&str, &str)] = &[
    ("src/orders/service.py", "def total(self) -> Decimal:\n        return sum(line.amount for line in self.lines)"),
    ("src/orders/service.py", "    if order.status == \"paid\":\n        raise AlreadyPaid(order.id)"),
    ("app/models/subscription.rb", "  def renew!\n    update!(ends_at: ends_at + 1.month)"),
    ("internal/queue/claim.go", "\tif err := tx.QueryRow(ctx, claimSQL, id).Scan(&item.ID); err != nil {\n\t\treturn nil, err"),
    ("src/components/CartSummary.tsx", "  const total = items.reduce((sum, i) => sum + i.price, 0);"),
    ("src/lib.rs", "pub fn retry_after(&self) -> Duration {\n        self.base * 2u32.pow(self.attempt)"),
    ("tests/test_refunds.py", "    assert refund.amount == Decimal(\"10.00\")"),
];

/// `text` as a JSON string's contents.
fn json_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

fn agent_edit_not_found(g: &mut Gen) -> Out {
    let (file, old) = g.pick(EDIT_TARGETS);
    let workdir = g.pick(&[
        "/work/repo",
        "/tmp/worktrees/item-",
        "/home/agent/workspace",
    ]);
    let workdir = if workdir.ends_with('-') {
        format!("{workdir}{}", g.int(1, 4000))
    } else {
        workdir.to_string()
    };
    let path = format!("{workdir}/{file}");
    let session = g.uuid();
    let mut t = Text::default();
    if g.chance(55) {
        // Claude Code's stream-json, the transcript's tail.
        let turns = g.int(4, 60);
        let failures = g.int(1, 3);
        t.line(format!(
            "claude exited with status 1 after {turns} turns ({}s): {failures} consecutive Edit failures on {file}",
            g.int(20, 1800)
        ));
        t.line("--- transcript (last events) ---");
        for _ in 0..g.int(0, 3) {
            let id = format!("toolu_01{}", alnum(g, 22));
            let tool = g.pick(&["Read", "Grep", "Bash"]);
            let input = match tool {
                "Read" => format!("{{\"file_path\":\"{path}\"}}"),
                "Grep" => format!(
                    "{{\"pattern\":\"{}\",\"path\":\"{workdir}\"}}",
                    g.pick(&["def total", "renew!", "claimSQL", "retry_after"])
                ),
                _ => format!(
                    "{{\"command\":\"{}\"}}",
                    g.pick(&[
                        "git status --short",
                        "pytest -q tests/test_orders.py",
                        "go build ./..."
                    ])
                ),
            };
            t.line(format!("{{\"type\":\"assistant\",\"message\":{{\"id\":\"msg_01{}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"{tool}\",\"input\":{input}}}]}},\"session_id\":\"{session}\"}}", alnum(g, 22)));
            t.line(format!("{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":[{{\"tool_use_id\":\"{id}\",\"type\":\"tool_result\",\"content\":\"(output elided, {} bytes)\"}}]}},\"session_id\":\"{session}\"}}", g.int(40, 40_000)));
        }
        for _ in 0..failures {
            let id = format!("toolu_01{}", alnum(g, 22));
            let marker = if file.ends_with(".py") || file.ends_with(".rb") {
                "#"
            } else {
                "//"
            };
            let new = format!(
                "{}\n        {marker} {}",
                old.lines().next().unwrap_or(old),
                g.pick(&["rounded to cents", "see #4411", "idempotent"])
            );
            t.line(format!(
                "{{\"type\":\"assistant\",\"message\":{{\"id\":\"msg_01{}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"Edit\",\"input\":{{\"file_path\":\"{path}\",\"old_string\":\"{}\",\"new_string\":\"{}\"}}}}]}},\"session_id\":\"{session}\"}}",
                alnum(g, 22),
                json_escape(old),
                json_escape(&new)
            ));
            t.line(format!(
                "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"content\":\"<tool_use_error>String to replace not found in file.\\nString: {}</tool_use_error>\",\"is_error\":true,\"tool_use_id\":\"{id}\"}}]}},\"session_id\":\"{session}\"}}",
                json_escape(old)
            ));
        }
        t.line(format!(
            "{{\"type\":\"result\",\"subtype\":\"error_during_execution\",\"is_error\":true,\"duration_ms\":{},\"duration_api_ms\":{},\"num_turns\":{turns},\"session_id\":\"{session}\",\"total_cost_usd\":{}.{:04}}}",
            g.int(20_000, 1_800_000),
            g.int(10_000, 900_000),
            g.int(0, 6),
            g.int(0, 9999)
        ));
    } else {
        // An agent loop on the text editor tool, logfmt.
        let run = g.hex(8);
        for _ in 0..g.int(0, 8) {
            let ts = g.timestamp();
            let tool = g.pick(&["view", "view", "create", "str_replace", "insert"]);
            t.line(format!("ts={ts} level=info run={run} msg=\"tool call\" tool=str_replace_based_edit_tool command={tool} path={workdir}/{} ok=true", g.pick(&[file, "README.md", "pyproject.toml", "go.mod"])));
        }
        let ts = g.timestamp();
        let shown: String = old.replace('\n', "\\n").replace('"', "\\\"");
        t.line(format!(
            "ts={ts} level=error run={run} msg=\"tool call failed\" tool=str_replace_based_edit_tool command=str_replace path={path} error=\"No replacement was performed, old_str `{shown}` did not appear verbatim in {path}.\""
        ));
        let ts = g.timestamp();
        t.line(format!(
            "ts={ts} level=error run={run} msg=\"agent aborted\" reason=\"edit failed {} times in a row\" item=item-{} attempt={}",
            g.int(2, 5),
            g.int(1, 4000),
            g.int(1, 3)
        ));
    }
    Out::plain(t)
}

// -- Agents: the validator's verdict below the threshold --------------------

const SPEC_GAPS: &[(&str, &str, &str)] = &[
    (
        "tests_missing",
        "No tests cover the refund path of OrderService",
        "src/orders/service.py:120",
    ),
    (
        "error_handling",
        "Webhook delivery swallows HTTP 5xx instead of retrying",
        "src/webhooks/deliver.py:64",
    ),
    (
        "spec_requirement",
        "Pagination cursor is not returned by GET /api/v1/orders",
        "app/api/routes/orders.py:88",
    ),
    (
        "docs",
        "README does not document the new --dry-run flag",
        "README.md:1",
    ),
    (
        "migration",
        "No down migration for 0042_add_refund_reason",
        "migrations/0042_add_refund_reason.sql:1",
    ),
    (
        "performance",
        "N+1 query when listing orders with their lines",
        "src/orders/repository.py:41",
    ),
    (
        "security",
        "Customer id taken from the request body, not the session",
        "app/api/routes/orders.py:132",
    ),
];

fn agent_validation_score(g: &mut Gen) -> Out {
    let threshold = g.pick(&[80u64, 85, 90, 100]);
    let score = g.int(10, threshold - 1);
    let item = format!("item-{}", g.int(1, 4000));
    let attempt = g.int(1, 3);
    let max = g.pick(&[3u64, 3, 5]);
    let spec = format!(
        "specs/{:03}-{}.md",
        g.int(1, 240),
        g.pick(&[
            "refund-reasons",
            "order-pagination",
            "webhook-retries",
            "dry-run-flag",
            "invoice-pdf"
        ])
    );
    let mut gaps: Vec<(&str, &str, &str)> = SPEC_GAPS.to_vec();
    g.shuffle(&mut gaps);
    let gaps = &gaps[..g.int(1, 6) as usize];
    let implemented: Vec<String> = (0..g.int(0, 5))
        .map(|_| format!("{} {}", capitalise(g.pick(VERBS)), g.pick(NOUNS)))
        .collect();
    let status = if score < 50 { "failed" } else { "incomplete" };
    let mut json = Text::default();
    json.line("{");
    json.line(format!("  \"completion_percentage\": {score}.0,"));
    json.line(format!("  \"status\": \"{status}\","));
    if implemented.is_empty() {
        json.line("  \"implemented\": [],");
    } else {
        json.line("  \"implemented\": [");
        for (i, done) in implemented.iter().enumerate() {
            let comma = if i + 1 < implemented.len() { "," } else { "" };
            json.line(format!("    \"{done}\"{comma}"));
        }
        json.line("  ],");
    }
    json.line("  \"missing\": [");
    for (i, (_, text, _)) in gaps.iter().enumerate() {
        let comma = if i + 1 < gaps.len() { "," } else { "" };
        json.line(format!("    \"{text}\"{comma}"));
    }
    json.line("  ],");
    json.line("  \"gaps\": {");
    for (i, (kind, text, location)) in gaps.iter().enumerate() {
        let severity = g.pick(&["high", "medium", "low"]);
        let comma = if i + 1 < gaps.len() { "," } else { "" };
        json.line(format!("    \"{kind}_{}\": {{", i + 1));
        json.line(format!("      \"description\": \"{text}\","));
        json.line(format!("      \"location\": \"{location}\","));
        json.line(format!("      \"severity\": \"{severity}\""));
        json.line(format!("    }}{comma}"));
    }
    json.line("  }");
    json.line("}");
    let mut t = Text::default();
    match g.below(3) {
        0 => {
            t.line(format!("Validation failed for {item} (attempt {attempt}/{max}): score {score} is below the threshold {threshold}"));
            t.line(format!(
                "validator: /validate-spec {spec} -> .agent/validation-result.json"
            ));
            append(&mut t, &json);
        }
        1 => {
            t.line(format!("✗ validation {score}% < {threshold}% ({spec})"));
            let compact: String = json.0.lines().map(str::trim).collect();
            t.line(compact);
            if attempt < max {
                t.line(format!(
                    "retrying with the gaps as feedback (attempt {} of {max})",
                    attempt + 1
                ));
            } else {
                t.line(format!("giving up after {max} attempts"));
            }
        }
        _ => {
            let ts = g.timestamp();
            t.line(format!(
                "time={ts} level=WARN msg=\"validation below threshold\" item={item} spec={spec} score={score} threshold={threshold} attempt={attempt} max_attempts={max} gaps={}",
                gaps.len()
            ));
            append(&mut t, &json);
        }
    }
    Out::plain(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(name: &str) -> u32 {
        (0..family_count())
            .find(|&f| family_name(f) == name)
            .unwrap_or_else(|| panic!("no family {name}"))
    }

    #[test]
    fn same_seed_same_corpus_other_seed_other_values() {
        let a = agent_failures(7, 2000);
        let b = agent_failures(7, 2000);
        let c = agent_failures(8, 2000);
        let text = |v: &[Labelled]| {
            v.iter()
                .map(|l| {
                    format!(
                        "{}|{:?}|{}|{:?}",
                        l.family, l.error_type, l.message, l.stack_trace
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(text(&a), text(&b));
        assert_ne!(text(&a), text(&c));
    }

    #[test]
    fn every_family_appears_with_skewed_sizes() {
        let n = 20_000;
        let corpus = agent_failures(1, n);
        assert_eq!(corpus.len(), n);
        let mut sizes = vec![0usize; family_count() as usize];
        for item in &corpus {
            sizes[item.family as usize] += 1;
        }
        assert!(sizes.iter().all(|&s| s >= 10), "{sizes:?}");
        assert!(*sizes.iter().max().unwrap() >= 2000, "{sizes:?}");
        assert_eq!(sizes, family_sizes(n));
        assert!(agent_failures(1, 0).is_empty());
        assert_eq!(agent_failures(1, 1).len(), 1);
    }

    #[test]
    fn enough_families_and_a_third_held_out() {
        assert!(family_count() >= 60);
        let held = (0..family_count()).filter(|&f| held_out(f)).count() as u32;
        assert!(held * 3 >= family_count() - 2 && held * 3 <= family_count() + 2);
    }

    #[test]
    fn names_are_unique() {
        for name in LARGEST {
            family(name);
        }
        let mut names: Vec<_> = (0..family_count()).map(family_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), family_count() as usize);
    }

    #[test]
    fn near_misses_are_different_families() {
        let corpus = agent_failures(3, 20_000);
        // (family, text it alone has among the near misses, its partner)
        let pairs = [
            ("npm-test", "`npm test` failed", "npm-install-404"),
            ("npm-install-404", "`npm install` failed", "npm-test"),
            ("http-502", "502 Bad Gateway", "http-503"),
            ("http-503", "503 Service Unavailable", "http-502"),
            (
                "script-exit-1",
                "ci-check.sh` failed: process exited with exit code 1",
                "script-exit-2",
            ),
            (
                "script-exit-2",
                "ci-check.sh` failed: process exited with exit code 2",
                "script-exit-1",
            ),
            (
                "py-conn-refused",
                "[Errno 111] Connection refused",
                "py-conn-reset",
            ),
            (
                "py-conn-reset",
                "Connection reset by peer",
                "py-conn-refused",
            ),
            ("eslint", "problems (", "tsc-ts2322"),
            ("tsc-ts2322", "error TS2322", "eslint"),
            ("git-push-non-ff", "(non-fast-forward)", "git-pull-conflict"),
            (
                "git-pull-conflict",
                "Automatic merge failed",
                "git-push-non-ff",
            ),
        ];
        for (name, marker, partner) in pairs {
            let (f, p) = (family(name), family(partner));
            assert_ne!(f, p);
            let with_marker: Vec<_> = corpus
                .iter()
                .filter(|l| l.family == f || l.family == p)
                .filter(|l| l.message.contains(marker))
                .collect();
            assert!(!with_marker.is_empty(), "{name}: no {marker:?}");
            assert!(
                with_marker.iter().all(|l| l.family == f),
                "{name}: {marker:?}"
            );
        }
        // The same panic message, told apart only by where it happened.
        for (name, site) in [
            ("rust-unwrap-none-worker", "src/queue/worker.rs:88:41"),
            ("rust-unwrap-none-config", "src/config/profile.rs:212:30"),
        ] {
            let items: Vec<_> = corpus.iter().filter(|l| l.family == family(name)).collect();
            assert!(!items.is_empty());
            for item in items {
                assert!(item.message.contains(UNWRAP_NONE));
                assert!(item.message.contains(site));
                assert!(item.stack_trace.as_deref().unwrap().contains(site));
            }
        }
        // KeyError in two functions.
        for (name, func) in [
            ("py-keyerror-orders", "in resolve_customer"),
            ("py-keyerror-config", "in load_settings"),
        ] {
            for item in corpus.iter().filter(|l| l.family == family(name)) {
                assert!(item.message.contains("KeyError: '"));
                assert!(item.stack_trace.as_deref().unwrap().contains(func));
            }
        }
    }

    #[test]
    fn has_the_hard_parts() {
        let corpus = agent_failures(5, 20_000);
        let count = |pred: &dyn Fn(&Labelled) -> bool| corpus.iter().filter(|l| pred(l)).count();
        assert!(
            count(&|l| l.message.contains("\x1b[")) > 100,
            "ANSI colours"
        );
        assert!(count(&|l| l.message.contains("\r\n")) > 100, "CRLF");
        assert!(
            count(&|l| l.message.lines().any(|line| line.len() > 2000)) > 10,
            "long lines"
        );
        assert!(count(&|l| l.stack_trace.is_some()) > 500, "stack traces");
        assert!(count(&|l| l.error_type.is_none()) > 50, "no error type");
    }

    #[test]
    fn fresh_families_come_after_and_only_from_fresh_failures() {
        let total = family_count() + fresh_family_count();
        assert_eq!(
            (total + fresh2_family_count() + fresh3_family_count()) as usize,
            FAMILIES.len()
        );
        assert!(fresh_family_count() >= 10);
        let mut names: Vec<_> = (0..total).map(family_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total as usize);
        assert!((0..family_count()).all(|f| !fresh(f)));
        assert!((family_count()..total).all(|f| fresh(f) && !held_out(f)));
        assert!(agent_failures(4, 5000).iter().all(|l| !fresh(l.family)));
        let corpus = fresh_failures(4, 3000);
        assert_eq!(corpus.len(), 3000);
        let mut sizes = vec![0usize; total as usize];
        for item in &corpus {
            assert!(fresh(item.family));
            sizes[item.family as usize] += 1;
        }
        assert!(
            sizes[family_count() as usize..].iter().all(|&s| s >= 20),
            "{sizes:?}"
        );
    }

    #[test]
    fn second_fresh_set_comes_next_and_only_from_fresh2_failures() {
        let first = family_count() + fresh_family_count();
        let all = first + fresh2_family_count();
        assert_eq!((all + fresh3_family_count()) as usize, FAMILIES.len());
        assert!((12..=16).contains(&fresh2_family_count()));
        let mut names: Vec<_> = (0..all).map(family_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all as usize);
        assert!((0..first).all(|f| !fresh2(f)));
        assert!((first..all).all(|f| fresh2(f) && !fresh(f) && !fresh3(f) && !held_out(f)));
        assert!(agent_failures(4, 5000).iter().all(|l| !fresh2(l.family)));
        assert!(fresh_failures(4, 3000).iter().all(|l| !fresh2(l.family)));
        let corpus = fresh2_failures(4, 3000);
        assert_eq!(corpus.len(), 3000);
        let mut sizes = vec![0usize; all as usize];
        for item in &corpus {
            assert!(fresh2(item.family));
            sizes[item.family as usize] += 1;
        }
        assert!(
            sizes[first as usize..].iter().all(|&s| s >= 20),
            "{sizes:?}"
        );
        assert_eq!(fresh2_failures(4, 3000).len(), 3000);
    }

    /// The second fresh set's near misses: each family has a marker its
    /// partner never has, and the two are different families.
    #[test]
    fn second_fresh_set_near_misses_are_different_families() {
        let corpus = fresh2_failures(3, 6000);
        let by_name = |name: &str| {
            (0..FAMILIES.len() as u32)
                .find(|&f| family_name(f) == name)
                .unwrap_or_else(|| panic!("no family {name}"))
        };
        let pairs = [
            (
                "k8s-crashloop-oomkilled",
                "Exit Code:    137",
                "k8s-crashloop-liveness",
            ),
            (
                "k8s-crashloop-liveness",
                "Exit Code:    143",
                "k8s-crashloop-oomkilled",
            ),
            (
                "pg-ledger-deadlock",
                "deadlock detected",
                "pg-ledger-duplicate-key",
            ),
            (
                "pg-ledger-duplicate-key",
                "duplicate key value",
                "pg-ledger-deadlock",
            ),
            (
                "anthropic-rate-limit",
                "Error code: 429",
                "anthropic-overloaded",
            ),
            (
                "anthropic-overloaded",
                "Error code: 529",
                "anthropic-rate-limit",
            ),
            (
                "pip-tls-unknown-issuer",
                "unable to get local issuer",
                "pip-tls-cert-expired",
            ),
            (
                "pip-tls-cert-expired",
                "certificate has expired",
                "pip-tls-unknown-issuer",
            ),
            (
                "flask-werkzeug-url-quote",
                "cannot import name 'url_quote'",
                "flask-limiter-missing",
            ),
            (
                "flask-limiter-missing",
                "No module named 'flask_limiter'",
                "flask-werkzeug-url-quote",
            ),
        ];
        for (name, marker, partner) in pairs {
            let (f, p) = (by_name(name), by_name(partner));
            assert!(fresh2(f) && fresh2(p) && f != p);
            let items: Vec<_> = corpus.iter().filter(|l| l.family == f).collect();
            assert!(!items.is_empty(), "{name}");
            assert!(items.iter().all(|l| l.message.contains(marker)), "{name}");
            assert!(
                corpus
                    .iter()
                    .filter(|l| l.family == p)
                    .all(|l| !l.message.contains(marker)),
                "{partner} has {marker:?}"
            );
        }
    }

    /// How many of `corpus` match `pred`.
    fn count(corpus: &[Labelled], pred: impl Fn(&Labelled) -> bool) -> usize {
        corpus.iter().filter(|l| pred(l)).count()
    }

    /// What every fresh set must hold: colour, CRLF, long outputs, and at
    /// least `traces` stack traces and `untyped` failures with no error
    /// type.
    fn assert_hard_parts(corpus: &[Labelled], traces: usize, untyped: usize) {
        assert!(
            count(corpus, |l| l.message.contains("\x1b[")) > 100,
            "ANSI colours"
        );
        assert!(count(corpus, |l| l.message.contains("\r\n")) > 50, "CRLF");
        assert!(
            count(corpus, |l| l.stack_trace.is_some()) > traces,
            "stack traces"
        );
        assert!(
            count(corpus, |l| l.error_type.is_none()) > untyped,
            "no error type"
        );
        assert!(
            count(corpus, |l| l.message.lines().count() > 30) > 500,
            "long outputs"
        );
    }

    #[test]
    fn second_fresh_set_has_the_hard_parts() {
        assert_hard_parts(&fresh2_failures(5, 6000), 500, 20);
    }

    /// FNV-1a (64 bit) over every field of `items`: a fingerprint that
    /// does not depend on std's hasher, which may change between releases.
    fn fingerprint(items: &[Labelled]) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for item in items {
            let text = format!(
                "{}|{:?}|{}|{:?}\0",
                item.family, item.error_type, item.message, item.stack_trace
            );
            for byte in text.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// The sets the published figures were measured on do not move when
    /// families are added: these fingerprints were taken before the second
    /// fresh set was written, and must never change. Both the first 2,000
    /// items and the bench's own draws (20,000 and 3,000 of seed 7).
    #[test]
    fn existing_sets_are_pinned() {
        for (name, items, pinned) in [
            (
                "agent_failures(7, 2000)",
                agent_failures(7, 2000),
                0xe3b8_7244_113b_052e_u64,
            ),
            (
                "agent_failures(7, 20000)",
                agent_failures(7, 20_000),
                0x301c_ee7a_b679_f458,
            ),
            (
                "fresh_failures(7, 2000)",
                fresh_failures(7, 2000),
                0x97be_f3d5_2208_1ef2,
            ),
            (
                "fresh_failures(7, 3000)",
                fresh_failures(7, 3000),
                0x0a4c_c0d2_792a_cfde,
            ),
        ] {
            assert_eq!(fingerprint(&items), pinned, "{name} changed");
        }
    }

    #[test]
    fn third_fresh_set_comes_last_and_only_from_fresh3_failures() {
        let first = family_count() + fresh_family_count() + fresh2_family_count();
        let all = first + fresh3_family_count();
        assert_eq!(first as usize, FRESH3_FROM);
        assert_eq!(all as usize, FAMILIES.len());
        assert_eq!(fresh3_family_count(), 20);
        let mut names: Vec<_> = (0..all).map(family_name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all as usize);
        assert!((0..first).all(|f| !fresh3(f)));
        assert!((first..all).all(|f| fresh3(f) && !fresh2(f) && !fresh(f) && !held_out(f)));
        assert!(agent_failures(4, 5000).iter().all(|l| !fresh3(l.family)));
        assert!(fresh_failures(4, 3000).iter().all(|l| !fresh3(l.family)));
        assert!(fresh2_failures(4, 3000).iter().all(|l| !fresh3(l.family)));
        let n = 3000;
        let corpus = fresh3_failures(4, n);
        assert_eq!(corpus.len(), n);
        let mut sizes = vec![0usize; all as usize];
        for item in &corpus {
            assert!(fresh3(item.family));
            sizes[item.family as usize] += 1;
        }
        let mine = &sizes[first as usize..];
        assert!(mine.iter().all(|&s| s >= 20), "{sizes:?}");
        assert_eq!(mine, sizes_of(FRESH3_FROM..FAMILIES.len(), n).as_slice());
        assert_eq!(mine.iter().sum::<usize>(), n);
        // Skewed, as the other sets: the largest family several times the
        // smallest.
        assert!(mine.iter().max().unwrap() >= &(4 * mine.iter().min().unwrap()));
        assert!(fresh3_failures(4, 0).is_empty());
        assert_eq!(fresh3_failures(4, 1).len(), 1);
    }

    #[test]
    fn third_fresh_set_same_seed_same_corpus_other_seed_other_values() {
        let text = |v: &[Labelled]| {
            v.iter()
                .map(|l| {
                    format!(
                        "{}|{:?}|{}|{:?}",
                        l.family, l.error_type, l.message, l.stack_trace
                    )
                })
                .collect::<Vec<_>>()
        };
        let a = fresh3_failures(7, 1500);
        assert_eq!(text(&a), text(&fresh3_failures(7, 1500)));
        assert_ne!(text(&a), text(&fresh3_failures(8, 1500)));
    }

    /// The third fresh set's near misses: each family has a marker its
    /// partner never has, and the two are different families.
    #[test]
    fn third_fresh_set_near_misses_are_different_families() {
        let corpus = fresh3_failures(3, 8000);
        let by_name = |name: &str| {
            (0..FAMILIES.len() as u32)
                .find(|&f| family_name(f) == name)
                .unwrap_or_else(|| panic!("no family {name}"))
        };
        // (family, any of these is in each of its messages, its partner)
        let pairs: [(&str, &[&str], &str); 14] = [
            (
                "laravel-orders-duplicate-entry",
                &["1062 Duplicate entry"],
                "laravel-orders-foreign-key",
            ),
            (
                "laravel-orders-foreign-key",
                &["1452 Cannot add or update a child row"],
                "laravel-orders-duplicate-entry",
            ),
            (
                "dotnet-nre-discount-apply",
                &["DiscountCalculator.Apply"],
                "dotnet-nre-invoice-render",
            ),
            (
                "dotnet-nre-invoice-render",
                &["InvoiceRenderer.RenderLines"],
                "dotnet-nre-discount-apply",
            ),
            (
                "playwright-expect-cart-total",
                &["getByTestId('cart-total')"],
                "playwright-timeout-place-order",
            ),
            (
                "playwright-timeout-place-order",
                &["Test timeout of"],
                "playwright-expect-cart-total",
            ),
            (
                "openai-rate-limit",
                &["Rate limit reached for"],
                "openai-insufficient-quota",
            ),
            (
                "openai-insufficient-quota",
                &["You exceeded your current quota"],
                "openai-rate-limit",
            ),
            (
                "helm-upgrade-in-progress",
                &["another operation (install/upgrade/rollback) is in progress"],
                "helm-upgrade-timeout",
            ),
            (
                "helm-upgrade-timeout",
                &[
                    "context deadline exceeded",
                    "timed out waiting for the condition",
                ],
                "helm-upgrade-in-progress",
            ),
            ("precommit-ruff", &["- hook id: ruff"], "precommit-black"),
            ("precommit-black", &["- hook id: black"], "precommit-ruff"),
            (
                "cmake-compile-no-member",
                &["no member named 'discount_cents'"],
                "cmake-undefined-reference",
            ),
            (
                "cmake-undefined-reference",
                &["TaxTable::rate_for"],
                "cmake-compile-no-member",
            ),
        ];
        for (name, markers, partner) in pairs {
            let (f, p) = (by_name(name), by_name(partner));
            assert!(fresh3(f) && fresh3(p) && f != p);
            let has = |l: &Labelled| {
                let text = format!("{}\n{}", l.message, l.stack_trace.as_deref().unwrap_or(""));
                markers.iter().any(|m| text.contains(m))
            };
            let items: Vec<_> = corpus.iter().filter(|l| l.family == f).collect();
            assert!(!items.is_empty(), "{name}");
            assert!(items.iter().all(|l| has(l)), "{name}");
            assert!(
                corpus.iter().filter(|l| l.family == p).all(|l| !has(l)),
                "{partner} has {markers:?}"
            );
            // Each pair shares its error type.
            assert_eq!(
                FAMILIES[f as usize].error_type,
                FAMILIES[p as usize].error_type
            );
        }
    }

    #[test]
    fn third_fresh_set_has_the_hard_parts() {
        let corpus = fresh3_failures(5, 6000);
        assert_hard_parts(&corpus, 300, 100);
        let count = |pred: &dyn Fn(&Labelled) -> bool| count(&corpus, pred);
        assert!(count(&|l| !l.message.contains('\n')) > 50, "one line");
        assert!(
            count(&|l| l.message.contains("Z ##[group]Run ")) > 300,
            "stamped lines"
        );
        assert!(count(&|l| l.message.contains(" level=")) > 100, "logfmt");
        assert!(count(&|l| l.message.contains("{\"")) > 200, "JSON");
        assert!(count(&|l| l.message.contains(":\\")) > 50, "Windows paths");
    }

    /// The second and third fresh sets do not move either: the second's
    /// fingerprints were taken before the third set was written, the
    /// third's when it was frozen (before the miner was first run on it).
    #[test]
    fn fresh_sets_two_and_three_are_pinned() {
        for (name, items, pinned) in [
            (
                "fresh2_failures(7, 2000)",
                fresh2_failures(7, 2000),
                0xcd2f_f045_3d76_671a_u64,
            ),
            (
                "fresh2_failures(7, 3000)",
                fresh2_failures(7, 3000),
                0xfdad_4126_bff6_843f,
            ),
            (
                "fresh3_failures(7, 3000)",
                fresh3_failures(7, 3000),
                0xb06a_db4e_4d7b_c848,
            ),
        ] {
            assert_eq!(
                fingerprint(&items),
                pinned,
                "{name} changed: {:#018x}",
                fingerprint(&items)
            );
        }
    }

    #[test]
    fn fast_enough() {
        let start = std::time::Instant::now();
        let corpus = agent_failures(11, 20_000);
        assert_eq!(corpus.len(), 20_000);
        // Generous: debug builds on a loaded machine.
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }
}
