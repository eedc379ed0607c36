//! Turning text into HTML that shows it as text.
//!
//! Owns [`esc`] (every character that could start markup or end an
//! attribute is escaped, so a tool argument is data, never markup), the
//! page frame every page shares, and small formatters (times, durations).
//! It must not know approvals.

use std::fmt::Write as _;

/// `text` escaped for element content and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title` (escaped here), the navigation, and `body` (HTML
/// already escaped by the caller). `count` goes into the title.
pub fn page(title: &str, count: Option<usize>, logged_in: Option<&str>, body: &str) -> String {
    let shown = match count {
        Some(n) if n > 0 => format!("({n}) {title}"),
        _ => title.to_owned(),
    };
    let mut nav = String::new();
    if let Some(csrf) = logged_in {
        let _ = write!(
            nav,
            "<nav><a href=\"/\">Inbox</a> <a href=\"/workspaces\">Workspaces</a>\
             <form method=\"post\" action=\"/logout\" class=\"inline\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\" class=\"link\">Log out</button></form></nav>",
            esc(csrf)
        );
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/static/inbox.css\">\
         <script src=\"/static/inbox.js\" defer></script></head>\
         <body><header class=\"top\"><h1><a href=\"/\">keel inbox</a></h1>{nav}</header>\
         <main>{body}</main></body></html>\n",
        esc(&shown)
    )
}

/// `ms` (Unix milliseconds) as `2026-12-03 13:45 UTC`.
pub fn when(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// How far `ms` lies after `now` in words (`in 6 d 23 h`, `in 5 min`).
pub fn until(ms: i64, now: i64) -> String {
    let s = (ms - now).max(0) / 1000;
    if s >= 86_400 {
        format!("in {} d {} h", s / 86_400, (s % 86_400) / 3600)
    } else if s >= 3600 {
        format!("in {} h {} min", s / 3600, (s % 3600) / 60)
    } else {
        format!("in {} min", (s + 59) / 60)
    }
}

/// Days since 1970-01-01 as (year, month, day) in the proleptic Gregorian
/// calendar.
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            esc("<script>alert(\"x\")</script> & 'q'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"
        );
        let p = page("a <b>", Some(2), None, "");
        assert!(p.contains("<title>(2) a &lt;b&gt;</title>"), "{p}");
    }

    #[test]
    fn times_read_as_dates_and_durations() {
        assert_eq!(when(0), "1970-01-01 00:00 UTC");
        assert_eq!(when(1_796_304_000_000), "2026-12-03 13:20 UTC");
        assert_eq!(until(7 * 86_400_000, 0), "in 7 d 0 h");
        assert_eq!(until(90_000, 0), "in 2 min");
        assert_eq!(until(0, 5), "in 0 min");
    }
}
