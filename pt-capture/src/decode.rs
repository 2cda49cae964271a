//! Decoding a recording whole: each trace of a raw PT file, a perf.data
//! file or a `weft pt record` capture directory, with the code it ran,
//! how its TSC becomes time, and who ran when ([`each_input`]); and a
//! capture's calls per thread, as `weft record` stores them
//! ([`capture_calls`]).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result, refuse};
use weft_pt::Errata;
use weft_pt::calls::{Call, Calls};
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::image::Image;
use weft_pt::perf_data::{PerfData, PtInfo, Queue, Switch, TimeConv};
use weft_pt::sideband::Note;
use weft_pt::threads::{Router, Stretches, Threads, TscToNs};
use weft_pt::time::Clocks;

/// What to decode: the trace and where its code comes from.
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// A raw PT file, a perf.data file (with `perf`) or a capture directory.
    pub trace: PathBuf,
    /// Code files, as `weft_pt::image::Image::add_spec` reads them.
    pub images: Vec<String>,
    /// A process's memory map whose executable files are the code.
    pub maps: Option<PathBuf>,
    /// `trace` is a perf.data file.
    pub perf: bool,
    /// The process whose code a per-CPU perf.data trace without context
    /// switches ran.
    pub pid: Option<i32>,
    /// Where separate debug files are looked for first.
    pub debug_dirs: Vec<PathBuf>,
    /// Demangle function names.
    pub demangle: bool,
}

impl Source {
    fn finder(&self) -> weft_symbols::Finder {
        weft_symbols::Finder::new(self.debug_dirs.clone(), self.demangle)
    }
}

pub fn read_trace(path: &Path) -> Result<Vec<u8>> {
    weft_symbols::read_file(path).map_err(Error::file("reading", path))
}

/// How `weft pt flow` and `calls` decode: the CPU's errata, the capture's
/// address filter, and whether to resync after an error.
#[derive(Default)]
pub struct Decoding {
    pub errata: Errata,
    pub filter: Vec<(u64, u64)>,
    pub resync: bool,
}

impl Decoding {
    /// The flow of `trace` over `image`, timed with `clocks`.
    pub fn flow<'a>(&self, trace: &'a [u8], image: &'a Image, clocks: Clocks) -> Flow<'a> {
        Flow::new(trace, image, self.errata)
            .with_clocks(clocks)
            .with_filter(self.filter.clone())
            .with_resync(self.resync)
    }
}

/// A trace to decode and the code it ran; from a perf.data file, one per
/// AUX queue, and from a capture directory, one per CPU, titled.
pub struct Input<'a> {
    pub title: Option<String>,
    pub trace: &'a [u8],
    pub image: &'a Image,
    /// How the trace's TSC becomes time, when the recording says.
    pub clock: Option<TscToNs>,
    /// The clocks the recording says it was made with (zero where it
    /// does not say).
    pub recorded: Option<Clocks>,
    /// Who ran when, for one CPU's trace of several threads.
    pub threads: Option<&'a Threads<'a>>,
    /// Thread names, by thread id, where the recording has them.
    pub comms: Option<&'a HashMap<i32, String>>,
    /// The recording's last trace (per-CPU traces of threads are put
    /// together after it).
    pub last: bool,
    /// The process a capture directory traced, when one.
    pub process: Option<i32>,
}

impl Input<'_> {
    pub fn title(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match &self.title {
            Some(title) => writeln!(out, "[{title}]"),
            None => Ok(()),
        }
    }

    /// `given`, with what the recording says where `given` says nothing.
    pub fn clocks(&self, mut given: Clocks) -> Clocks {
        if let Some(recorded) = self.recorded {
            if given.mtc_freq == 0 {
                given.mtc_freq = recorded.mtc_freq;
            }
            if given.ctc_eax == 0 && given.ctc_ebx == 0 {
                (given.ctc_eax, given.ctc_ebx) = (recorded.ctc_eax, recorded.ctc_ebx);
            }
            if given.nom_freq == 0 {
                given.nom_freq = recorded.nom_freq;
            }
        }
        given
    }
}

/// Hands `decode` each trace of `source` with its code, and sums the
/// decoding errors it counts. A perf.data queue's trace is put together
/// only when its turn comes, and each process's code is read once.
/// `decode`'s own errors are `E`, which reading the inputs' fits into.
pub fn each_input<E: From<Error>>(
    source: &Source,
    decode: &mut dyn FnMut(Input) -> Result<usize, E>,
) -> Result<usize, E> {
    if source.trace.is_dir() {
        return each_cpu(source, decode);
    }
    let file = read_trace(&source.trace)?;
    if !source.perf {
        return decode(Input {
            title: None,
            trace: &file,
            image: &read_image(source)?,
            clock: None,
            recorded: None,
            threads: None,
            comms: None,
            last: true,
            process: None,
        });
    }
    let name = source.trace.display();
    let perf = PerfData::parse(&file).map_err(|error| Error::Perf {
        path: name.to_string(),
        error,
    })?;
    if perf.queues.is_empty() {
        let refused = format!("{name}: no Intel PT trace (no AUXTRACE records)");
        return Err(Error::Refused(refused).into());
    }
    let clock = perf.clock();
    // A per-CPU queue (`perf record -a`) is split between threads by the
    // switch records when the file has them and says how TSC maps to
    // their time; without, --pid names the one process to decode.
    let switches: Vec<Option<(Vec<Switch>, TimeConv)>> = perf
        .queues
        .iter()
        .map(|queue| {
            let on = perf.switches_on(u32::try_from(queue.cpu).ok()?);
            (!on.is_empty()).then_some(on).zip(clock)
        })
        .collect();
    let mut pids = BTreeSet::new();
    for (queue, switches) in perf.queues.iter().zip(&switches) {
        match switches {
            Some((on, _)) => pids.extend(on.iter().map(|s| s.pid).filter(|p| *p > 0)),
            None if queue.cpu >= 0 => {
                let Some(pid) = source.pid else {
                    let refused = format!(
                        "{name}: the trace is per CPU (perf record -a) without context-switch \
                         records: name the process whose code to decode with --pid"
                    );
                    return Err(Error::Refused(refused).into());
                };
                pids.insert(pid);
            }
            None => {
                pids.insert(perf.pid_of(queue.tid).unwrap_or(queue.tid));
            }
        }
    }
    let mut images = HashMap::new();
    for pid in pids {
        let mut image = Image::with_finder(source.finder());
        let skipped = image
            .add_mappings(perf.mappings(pid), &mut |path| {
                weft_symbols::read_file(path)
            })
            .map_err(Error::from)?;
        warn_skipped(skipped);
        images.insert(pid, image);
    }
    let none = Image::new();
    // The last name each thread had.
    let comms: HashMap<i32, String> = perf.comms.iter().map(|c| (c.tid, c.comm.clone())).collect();
    let mut errors = 0;
    let count = perf.queues.len();
    for (i, (queue, switches)) in perf.queues.iter().zip(switches).enumerate() {
        let threads = switches.map(|(switches, conv)| Threads {
            switches,
            clock: TscToNs::Perf(conv),
            images: &images,
            none: &none,
        });
        let image = match (&threads, queue.cpu >= 0) {
            (Some(_), _) => &none,
            (None, true) => &images[&source.pid.unwrap_or_default()],
            (None, false) => &images[&perf.pid_of(queue.tid).unwrap_or(queue.tid)],
        };
        errors += decode(Input {
            title: Some(queue_title(&perf, queue)),
            trace: &queue.trace(&file),
            image,
            clock: clock.map(TscToNs::Perf),
            recorded: perf.info.as_ref().map(PtInfo::clocks),
            threads: threads.as_ref(),
            comms: Some(&comms),
            last: i + 1 == count,
            process: None,
        })?;
    }
    Ok(errors)
}

/// Hands `decode` each CPU's trace of a `weft pt record` capture, with the
/// code of the process it traced (or that `--image` and `--maps` give).
fn each_cpu<E: From<Error>>(
    source: &Source,
    decode: &mut dyn FnMut(Input) -> Result<usize, E>,
) -> Result<usize, E> {
    let saved = crate::dir::load(&source.trace)?;
    let name = source.trace.display();
    // The code of each process the capture kept, or what the command
    // line gives for the traced one.
    let images: HashMap<i32, Image> = if source.images.is_empty() && source.maps.is_none() {
        if saved.maps.is_empty() {
            let refused = format!(
                "{name}: the capture kept no process's maps: give the code with --image or --maps"
            );
            return Err(Error::Refused(refused).into());
        }
        saved
            .maps
            .iter()
            .map(|(pid, maps)| {
                let image = Image::with_finder(source.finder());
                Ok((*pid, maps_image(image, maps, &saved.build_ids)?))
            })
            .collect::<Result<_>>()?
    } else {
        HashMap::from([(saved.pid.unwrap_or_default(), read_image(source)?)])
    };
    // Without the context switches, a trace is decoded with the code of
    // the one process it traced.
    let process = match (saved.pid, images.len()) {
        (Some(pid), _) => Some(pid),
        (None, 1) => images.keys().next().copied(),
        (None, _) => None,
    };
    let none = Image::new();
    let image = process.and_then(|pid| images.get(&pid)).unwrap_or(&none);
    let mut errors = 0;
    for (cpu, path) in &saved.traces {
        let trace = read_trace(path)?;
        let switches: Vec<Switch> = saved
            .switches
            .iter()
            .filter(|s| s.cpu == *cpu)
            .copied()
            .collect();
        // With them, each CPU's trace is split between the threads that
        // ran, each decoded with its process's code where the capture
        // kept it.
        if switches.is_empty() && process.is_none() {
            let refused = format!(
                "{name}: CPU {cpu}'s trace has no context switches to tell its {} processes apart",
                images.len()
            );
            return Err(Error::Refused(refused).into());
        }
        let threads = saved
            .clock
            .filter(|_| !switches.is_empty())
            .map(|clock| Threads {
                switches,
                clock: TscToNs::Monotonic(clock),
                images: &images,
                none: &none,
            });
        errors += decode(Input {
            title: Some(format!("cpu {cpu}, {} bytes", trace.len())),
            trace: &trace,
            image,
            clock: saved.clock.map(TscToNs::Monotonic),
            recorded: Some(Clocks {
                mtc_freq: saved.mtc_period,
                ctc_eax: saved.cpuid_0x15.0,
                ctc_ebx: saved.cpuid_0x15.1,
                ..Clocks::default()
            }),
            threads: threads.as_ref(),
            comms: Some(&saved.threads),
            last: Some(cpu) == saved.traces.last().map(|(c, _)| c),
            process,
        })?;
    }
    Ok(errors)
}

pub fn queue_title(perf: &PerfData, queue: &Queue) -> String {
    let comm = perf.comm(queue.tid).unwrap_or("?");
    let whose = if queue.cpu >= 0 {
        format!("cpu {}", queue.cpu)
    } else {
        format!("thread {} ({comm})", queue.tid)
    };
    format!("queue {}: {whose}, {} bytes", queue.idx, queue.bytes())
}

/// Run the flow, handing each step to `out` until it fails; the number of
/// decoding errors met.
pub fn walk(flow: &mut Flow, out: &mut dyn FnMut(Step) -> std::io::Result<()>) -> Result<usize> {
    let mut errors = 0;
    let mut failed = None;
    flow.run(&mut |step| {
        // A sideband that cannot be read is an error in the input too.
        let sideband_error =
            matches!(&step, Step::Sideband(Note::Problem { problem, .. }) if problem.is_error());
        if matches!(step, Step::Event(Event::Error { .. }, _)) || sideband_error {
            errors += 1;
        }
        if failed.is_none()
            && let Err(e) = out(step)
        {
            failed = Some(e);
        }
    });
    match failed {
        Some(e) => Err(Error::Write(e)),
        None => Ok(errors),
    }
}

/// What a thread's calls are called with: its process, its thread, its
/// process's code and its calls.
pub type ThreadCalls<'a> = dyn FnMut(i32, i32, &Image, Vec<Call>) -> std::io::Result<()> + 'a;

/// Routes the steps of `input`, one CPU's trace, to the threads that ran
/// them (`stretches`, with `cpu` the number of traces routed so far); after
/// the last, hands `out` each thread's calls, each thread with its own
/// call stack. Returns the decoding errors met.
pub fn by_thread(
    (decoding, clocks): (&Decoding, Clocks),
    input: &Input,
    threads: &Threads,
    (stretches, cpu): (&mut Stretches, &mut usize),
    ns: &dyn Fn(Call) -> Call,
    out: &mut ThreadCalls,
) -> Result<usize> {
    let code_at = |tsc| threads.code_at(tsc);
    let mut flow = decoding
        .flow(input.trace, input.image, clocks)
        .with_code_at(&code_at);
    let mut router = Router::default();
    let errors = walk(&mut flow, &mut |step| {
        router.step(threads, step, &mut |thread, step| {
            stretches.push(*cpu, thread, step);
        });
        Ok(())
    })?;
    *cpu += 1;
    if !input.last {
        return Ok(errors);
    }
    for ((pid, tid), steps) in std::mem::take(stretches).threads() {
        let image = threads.image(pid);
        let mut calls = Calls::new(image);
        let mut made = Vec::new();
        for step in &steps {
            calls.step(step, &mut |call| made.push(ns(call)));
        }
        out(pid, tid, image, made).map_err(Error::Write)?;
    }
    Ok(errors)
}

/// Decodes the `weft pt record` capture in `dir` into calls timed in
/// `CLOCK_MONOTONIC` ns, as `weft record` stores them: `out` gets each
/// thread's process, thread (0 where the capture has no context switches
/// to tell), code and calls. Returns the decoding errors met.
pub fn capture_calls(dir: &Path, out: &mut ThreadCalls) -> Result<usize> {
    let source = Source {
        trace: dir.to_owned(),
        images: Vec::new(),
        maps: None,
        perf: false,
        pid: None,
        debug_dirs: Vec::new(),
        demangle: true,
    };
    let decoding = Decoding::default();
    let (mut stretches, mut cpu) = (Stretches::default(), 0);
    each_cpu(&source, &mut |input| {
        let Some(clock) = input.clock else {
            refuse!(
                "{}: the capture has no clock readings: its calls cannot be placed in time",
                dir.display()
            );
        };
        let ns = |call: Call| call.with_clock(|tsc| clock.ns(tsc));
        let clocks = input.clocks(Clocks::default());
        if let Some(threads) = input.threads {
            let ends = (&mut stretches, &mut cpu);
            return by_thread((&decoding, clocks), &input, threads, ends, &ns, out);
        }
        // One process's trace without the switches: its threads are not
        // told apart.
        let mut flow = decoding.flow(input.trace, input.image, clocks);
        let mut calls = Calls::new(input.image);
        let mut made = Vec::new();
        let errors = walk(&mut flow, &mut |step| {
            calls.step(&step, &mut |call| made.push(ns(call)));
            Ok(())
        })?;
        out(input.process.unwrap_or_default(), 0, input.image, made).map_err(Error::Write)?;
        Ok(errors)
    })
}

fn read_image(source: &Source) -> Result<Image> {
    let mut image = Image::with_finder(source.finder());
    for spec in &source.images {
        image.add_spec(spec)?;
    }
    match &source.maps {
        Some(maps) => maps_image(image, maps, &HashMap::new()),
        None if source.images.is_empty() => refuse!(
            "{}: give the code the trace ran with --image or --maps",
            source.trace.display()
        ),
        None => Ok(image),
    }
}

/// `image` with the executable files of a process's memory map `maps`. A
/// file whose build-id is not the one `build_ids` says the capture saw is
/// left out, with why: its code is not the code that ran.
fn maps_image(
    mut image: Image,
    maps: &Path,
    build_ids: &HashMap<String, Option<String>>,
) -> Result<Image> {
    let text = std::fs::read_to_string(maps).map_err(Error::file("reading", maps))?;
    let mut read = |path: &Path| {
        let bytes = weft_symbols::read_file(path)?;
        let name = path.display().to_string();
        let Some(then) = build_ids.get(&name) else {
            return Ok(bytes);
        };
        let now = weft_pt::image::build_id(&name, &bytes).ok().flatten();
        if now == *then {
            return Ok(bytes);
        }
        let show = |id: &Option<String>| id.clone().unwrap_or_else(|| "none".into());
        Err(std::io::Error::other(format!(
            "changed since the capture (build-id {} then, {} now)",
            show(then),
            show(&now)
        )))
    };
    let skipped = image
        .add_maps(&text, &mut read)
        .map_err(|error| Error::Damaged(format!("{}: {error}", maps.display())))?;
    warn_skipped(skipped);
    Ok(image)
}

fn warn_skipped(skipped: Vec<weft_pt::image::ImageError>) {
    for file in skipped {
        log::warn!("weft: warning: not in the image: {file}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_fills_in_the_clocks_the_command_line_left_out() {
        let image = Image::new();
        let input = Input {
            title: None,
            trace: &[],
            image: &image,
            clock: None,
            recorded: Some(Clocks {
                mtc_freq: 3,
                ctc_eax: 2,
                ctc_ebx: 168,
                nom_freq: 24,
                ..Clocks::default()
            }),
            threads: None,
            comms: None,
            last: true,
            process: None,
        };
        let filled = input.clocks(Clocks::default());
        assert_eq!(
            (
                filled.mtc_freq,
                filled.ctc_eax,
                filled.ctc_ebx,
                filled.nom_freq
            ),
            (3, 2, 168, 24)
        );
        let given = Clocks {
            mtc_freq: 6,
            ctc_eax: 1,
            ctc_ebx: 100,
            nom_freq: 30,
            ..Clocks::default()
        };
        assert_eq!(input.clocks(given), given, "what the user gave wins");
    }
}
