//! Logs in Cilium's logfmt shape: `level=info msg="..." subsys=daemon key=value`.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

struct Logfmt;

#[derive(Default)]
struct Fields {
    msg: String,
    rest: String,
}

fn quote_if_needed(v: &str) -> String {
    if v.is_empty() || v.contains([' ', '"', '=']) {
        format!("{v:?}")
    } else {
        v.to_owned()
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg = value.to_owned();
        } else {
            self.rest
                .push_str(&format!(" {}={}", field.name(), quote_if_needed(value)));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let v = format!("{value:?}");
        if field.name() == "message" {
            self.msg = v;
        } else {
            self.rest
                .push_str(&format!(" {}={}", field.name(), quote_if_needed(&v)));
        }
    }
}

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        let time = api::timefmt::rfc3339(std::time::SystemTime::now());
        writeln!(
            w,
            "time={time} level={level} msg={:?}{}",
            fields.msg, fields.rest
        )
    }
}

/// Installs the global subscriber; `debug` lowers the level to debug.
pub fn init(debug: bool) {
    let level = if debug { "debug" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CILIUM_LOG_LEVEL")
        .unwrap_or_else(|_| level.into());
    let _ = tracing_subscriber::fmt()
        .event_format(Logfmt)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
