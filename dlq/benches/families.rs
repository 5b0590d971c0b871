//! How well failure families group, and how fast the miner runs.
//!
//! `cargo bench --bench families` prints, for each data set: grouping
//! accuracy (GA: a message counts as right when its predicted group holds
//! exactly the messages of its true group; Zhu et al., ICSE-SEIP 2019),
//! pairwise precision, recall and F1 (over pairs of messages put in one
//! group), and the number of groups found against the true number.
//!
//! - Loghub-2k: the labelled 2,000-line samples of the Loghub log-parsing
//!   benchmark, from the folder in DLQ_BENCH_LOGHUB (files
//!   `<System>_2k.log_structured.csv`, columns `Content` and `EventId`;
//!   skipped when unset). Each GA is printed beside Drain's published GA
//!   for that system (logpai/logparser's benchmark table, with settings
//!   tuned per system); the miner runs with its one configuration.
//! - The agent-failure corpus of `dlqlite::corpus` (generated, labelled),
//!   its development families and its held-out families reported apart,
//!   its fresh families (added later, never looked at while tuning), its
//!   second fresh set (written by someone who had not seen the miner's
//!   rules) and its third (written blind again, by another hand), each on
//!   failures of their own.
//! - Throughput: messages per second of the miner alone, one thread.

use dlqlite::corpus::Labelled;
use dlqlite::families::Miner;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Drain's published GA per system (logparser's table).
const DRAIN: &[(&str, f64)] = &[
    ("HDFS", 0.998),
    ("Hadoop", 0.948),
    ("Spark", 0.920),
    ("Zookeeper", 0.967),
    ("BGL", 0.963),
    ("Apache", 1.000),
    ("OpenSSH", 0.788),
    ("Linux", 0.690),
    ("HPC", 0.887),
    ("Thunderbird", 0.955),
    ("Windows", 0.997),
    ("Android", 0.911),
    ("HealthApp", 0.780),
    ("Mac", 0.787),
    ("Proxifier", 0.527),
    ("OpenStack", 0.733),
];

/// Scores of one grouping against the truth.
struct Scores {
    ga: f64,
    precision: f64,
    recall: f64,
    f1: f64,
    groups: usize,
    truth: usize,
}

fn pairs(n: u64) -> u64 {
    n * n.saturating_sub(1) / 2
}

fn score(predicted: &[usize], truth: &[u32]) -> Scores {
    let mut by_predicted: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in predicted.iter().enumerate() {
        by_predicted.entry(*p).or_default().push(i);
    }
    let mut true_sizes: HashMap<u32, u64> = HashMap::new();
    for t in truth {
        *true_sizes.entry(*t).or_default() += 1;
    }
    let mut right = 0u64;
    let mut same_both = 0u64;
    for members in by_predicted.values() {
        let mut inside: HashMap<u32, u64> = HashMap::new();
        for &i in members {
            *inside.entry(truth[i]).or_default() += 1;
        }
        same_both += inside.values().map(|&n| pairs(n)).sum::<u64>();
        if inside.len() == 1 && true_sizes[&truth[members[0]]] == members.len() as u64 {
            right += members.len() as u64;
        }
    }
    let same_predicted: u64 = by_predicted.values().map(|m| pairs(m.len() as u64)).sum();
    let same_truth: u64 = true_sizes.values().map(|&n| pairs(n)).sum();
    let ratio = |a: u64, b: u64| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    let precision = ratio(same_both, same_predicted);
    let recall = ratio(same_both, same_truth);
    Scores {
        ga: ratio(right, truth.len() as u64),
        precision,
        recall,
        f1: if precision + recall == 0.0 {
            0.0
        } else {
            2.0 * precision * recall / (precision + recall)
        },
        groups: by_predicted.len(),
        truth: true_sizes.len(),
    }
}

fn print_row(name: &str, s: &Scores, peer: Option<f64>) {
    let peer = peer.map_or("     -".to_string(), |p| format!("{p:6.3}"));
    println!(
        "{name:<24} {:6.4} {peer} {:9.3} {:6.3} {:6.3} {:7} {:6}",
        s.ga, s.precision, s.recall, s.f1, s.groups, s.truth
    );
}

fn header() {
    println!(
        "{:<24} {:>6} {:>6} {:>9} {:>6} {:>6} {:>7} {:>6}",
        "data set", "GA", "Drain", "precision", "recall", "F1", "groups", "true"
    );
}

/// One Loghub-2k system: its messages and true template ids.
fn loghub(dir: &Path, system: &str) -> Option<(Vec<String>, Vec<u32>)> {
    let path = dir.join(format!("{system}_2k.log_structured.csv"));
    let mut reader = csv::Reader::from_path(&path).ok()?;
    let headers = reader.headers().ok()?.clone();
    let content = headers.iter().position(|h| h == "Content")?;
    let event = headers.iter().position(|h| h == "EventId")?;
    let mut ids: HashMap<String, u32> = HashMap::new();
    let (mut messages, mut truth) = (Vec::new(), Vec::new());
    for record in reader.records() {
        let record = record.expect("a well-formed CSV record");
        messages.push(record[content].to_string());
        let next = ids.len() as u32;
        truth.push(*ids.entry(record[event].to_string()).or_insert(next));
    }
    Some((messages, truth))
}

fn mine(messages: &[(Option<&str>, &str, Option<&str>)]) -> Vec<usize> {
    let mut miner = Miner::new();
    messages
        .iter()
        .map(|(error_type, message, trace)| miner.assign(*error_type, message, *trace).family)
        .collect()
}

/// What the miner is given of one labelled failure.
fn as_input(f: &Labelled) -> (Option<&str>, &str, Option<&str>) {
    (
        f.error_type.as_deref(),
        f.message.as_str(),
        f.stack_trace.as_deref(),
    )
}

/// Prints each true family the miner split or merged, with the first line
/// of one message of each group it made (`DLQ_BENCH_MISSES=1`): where to
/// look, not a score.
fn misses(corpus: &[Labelled], predicted: &[usize]) {
    let mut groups_of: HashMap<u32, HashMap<usize, usize>> = HashMap::new();
    let mut families_of: HashMap<usize, std::collections::BTreeSet<u32>> = HashMap::new();
    for (f, &p) in corpus.iter().zip(predicted) {
        *groups_of.entry(f.family).or_default().entry(p).or_default() += 1;
        families_of.entry(p).or_default().insert(f.family);
    }
    let mut families: Vec<_> = groups_of.into_iter().collect();
    families.sort_by_key(|(family, _)| *family);
    for (family, groups) in families {
        // The fresh families are an unseen measure: how the miner groups
        // them is never shown.
        if dlqlite::corpus::fresh(family) || dlqlite::corpus::blind(family) {
            continue;
        }
        let merged = groups.keys().any(|p| families_of[p].len() > 1);
        if groups.len() == 1 && !merged {
            continue;
        }
        println!(
            "\n{family} {} ({}): {} groups{}",
            dlqlite::corpus::family_name(family),
            if dlqlite::corpus::fresh2(family) {
                "second fresh set, examined"
            } else if dlqlite::corpus::fresh3(family) {
                "third fresh set, examined"
            } else if dlqlite::corpus::held_out(family) {
                "held out"
            } else {
                "development"
            },
            groups.len(),
            if merged { ", shares a group" } else { "" }
        );
        for (&p, n) in &groups {
            let Some((sample, _)) = corpus.iter().zip(predicted).find(|(_, q)| **q == p) else {
                continue;
            };
            let head: String = sample
                .message
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(110)
                .collect();
            println!("   {n:5}  {:?} {head}", families_of[&p]);
            // What the miner compared: the key's words (`<*>` for a
            // variable, `!` before a pinned status) and the crash site.
            let key =
                dlqlite::families::key::key_of(&sample.message, sample.stack_trace.as_deref());
            let words: Vec<String> = key
                .words
                .iter()
                .map(|w| {
                    let shown = w.key.as_deref().unwrap_or("<*>");
                    if w.pinned {
                        format!("!{shown}")
                    } else {
                        shown.to_string()
                    }
                })
                .collect();
            println!(
                "          key: {}{}",
                words.join(" ").chars().take(160).collect::<String>(),
                key.site.map(|s| format!("  @ {s}")).unwrap_or_default()
            );
        }
    }
}

fn throughput(name: &str, messages: &[(Option<&str>, &str, Option<&str>)]) {
    let rounds = (200_000 / messages.len().max(1)).max(1);
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(mine(messages));
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "throughput {name}: {:.0} messages/s ({} messages, one thread)",
        (rounds * messages.len()) as f64 / seconds,
        rounds * messages.len()
    );
}

fn main() {
    println!("families bench, {}", chrono::Utc::now().format("%Y-%m-%d"));
    header();
    let mut loghub_all: Vec<String> = Vec::new();
    match std::env::var_os("DLQ_BENCH_LOGHUB") {
        None => println!("(Loghub skipped: set DLQ_BENCH_LOGHUB to its folder; README says where)"),
        Some(dir) => {
            let (mut ours, mut theirs, mut n) = (0.0, 0.0, 0.0);
            for (system, drain) in DRAIN {
                let Some((messages, truth)) = loghub(Path::new(&dir), system) else {
                    continue;
                };
                let input: Vec<_> = messages.iter().map(|m| (None, m.as_str(), None)).collect();
                let scores = score(&mine(&input), &truth);
                print_row(system, &scores, Some(*drain));
                ours += scores.ga;
                theirs += drain;
                n += 1.0;
                loghub_all.extend(messages);
            }
            if n > 0.0 {
                println!(
                    "{:<22} {:6.4} {:6.3}   (average GA over {n} systems)",
                    "Loghub average",
                    ours / n,
                    theirs / n
                );
            }
        }
    }
    let corpus = dlqlite::corpus::agent_failures(7, 20_000);
    for (name, held) in [
        ("agent failures (dev)", false),
        ("agent failures (held)", true),
    ] {
        let part: Vec<_> = corpus
            .iter()
            .filter(|f| dlqlite::corpus::held_out(f.family) == held)
            .collect();
        let input: Vec<_> = part.iter().map(|f| as_input(f)).collect();
        let truth: Vec<u32> = part.iter().map(|f| f.family).collect();
        print_row(name, &score(&mine(&input), &truth), None);
    }
    // The fresh families (`dlqlite::corpus::fresh`): failures of their own,
    // mined apart like each half above. Their misses are never listed.
    let fresh = dlqlite::corpus::fresh_failures(7, 3_000);
    let fresh_input: Vec<_> = fresh.iter().map(as_input).collect();
    let fresh_truth: Vec<u32> = fresh.iter().map(|f| f.family).collect();
    print_row(
        "agent failures (fresh)",
        &score(&mine(&fresh_input), &fresh_truth),
        None,
    );
    // The second and third fresh sets (`dlqlite::corpus::fresh2`,
    // `fresh3`), the same way: each as a whole, then its examined and its
    // blind half mined alone. Only the examined halves' misses are ever
    // listed.
    let split_mined = |set: &[Labelled], blind: Option<bool>, name: &str| {
        let part: Vec<Labelled> = set
            .iter()
            .filter(|f| blind.is_none_or(|b| dlqlite::corpus::blind(f.family) == b))
            .cloned()
            .collect();
        let input: Vec<_> = part.iter().map(as_input).collect();
        let truth: Vec<u32> = part.iter().map(|f| f.family).collect();
        let families = truth
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let predicted = mine(&input);
        print_row(
            &format!("{name} ({families})"),
            &score(&predicted, &truth),
            None,
        );
        (part, predicted)
    };
    let fresh2 = dlqlite::corpus::fresh2_failures(7, 3_000);
    split_mined(&fresh2, None, "second fresh set");
    let (examined2, predicted2) = split_mined(&fresh2, Some(false), "2nd fresh, examined");
    split_mined(&fresh2, Some(true), "2nd fresh, blind");
    let fresh3 = dlqlite::corpus::fresh3_failures(7, 3_000);
    split_mined(&fresh3, None, "third fresh set");
    let (examined3, predicted3) = split_mined(&fresh3, Some(false), "3rd fresh, examined");
    split_mined(&fresh3, Some(true), "3rd fresh, blind");
    let input: Vec<_> = corpus.iter().map(as_input).collect();
    let truth: Vec<u32> = corpus.iter().map(|f| f.family).collect();
    let predicted = mine(&input);
    print_row("agent failures (all)", &score(&predicted, &truth), None);
    if std::env::var_os("DLQ_BENCH_MISSES").is_some() {
        misses(&corpus, &predicted);
        misses(&examined2, &predicted2);
        misses(&examined3, &predicted3);
    }
    if !loghub_all.is_empty() {
        let input: Vec<_> = loghub_all
            .iter()
            .map(|m| (None, m.as_str(), None))
            .collect();
        throughput("Loghub lines", &input);
    }
    throughput("agent failures", &input);
}
