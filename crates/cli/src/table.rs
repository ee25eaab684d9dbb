//! Tab-aligned output like Go's text/tabwriter with three spaces of padding.

pub fn render(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Go's text/tabwriter over `text` (no flags): a cell is text ended by a
/// tab, a line's last cell is not aligned, and a column is as wide as the
/// widest of its cells plus `padding` (at least `minwidth`) over each run
/// of consecutive lines that have it.
pub fn tabwrite(text: &str, minwidth: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut widths: Vec<Vec<usize>> = lines.iter().map(|l| vec![0; l.len() - 1]).collect();
    column_blocks(&lines, &mut widths, 0, lines.len(), 0, (minwidth, padding));
    lines
        .iter()
        .zip(&widths)
        .map(|(cells, w)| {
            let mut line = String::new();
            for (i, cell) in cells.iter().enumerate() {
                line.push_str(cell);
                if let Some(w) = w.get(i) {
                    line.push_str(&" ".repeat(w - cell.chars().count()));
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tab-aligned `lines` whose columns never narrow from one call to the
/// next (liggitt/tabwriter's RememberWidths, which `statedb --watch`
/// prints with): `widths` carries them. Every line's last cell is left
/// as is.
pub fn tabwrite_remembering(
    lines: &[String],
    minwidth: usize,
    padding: usize,
    widths: &mut Vec<usize>,
) -> String {
    let split: Vec<Vec<&str>> = lines.iter().map(|l| l.split('\t').collect()).collect();
    for cells in &split {
        for (i, cell) in cells.iter().take(cells.len() - 1).enumerate() {
            if widths.len() <= i {
                widths.push(minwidth);
            }
            widths[i] = widths[i].max(cell.chars().count() + padding);
        }
    }
    let mut out = String::new();
    for cells in &split {
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(widths[i] - cell.chars().count()));
            }
        }
        out.push('\n');
    }
    out
}

fn column_blocks(
    lines: &[Vec<&str>],
    widths: &mut [Vec<usize>],
    start: usize,
    end: usize,
    col: usize,
    (minwidth, padding): (usize, usize),
) {
    let has = |l: &Vec<&str>| col + 1 < l.len();
    let mut i = start;
    while i < end {
        if !has(&lines[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut width = minwidth;
        while j < end && has(&lines[j]) {
            width = width.max(lines[j][col].chars().count() + padding);
            j += 1;
        }
        for w in &mut widths[i..j] {
            w[col] = width;
        }
        column_blocks(lines, widths, i, j, col + 1, (minwidth, padding));
        i = j;
    }
}

/// Cilium's `TablePrinter`: a key's first value beside it, its others on
/// lines of their own below; keys in order (Go's map order is random).
pub fn print_keyed(
    first: &str,
    second: &str,
    data: &std::collections::BTreeMap<String, Vec<String>>,
) {
    let mut text = format!("{first}\t{second}\n");
    for (key, values) in data {
        for (i, v) in values.iter().enumerate() {
            let k = if i == 0 { key.as_str() } else { "" };
            text.push_str(&format!("{k}\t{v}\t\n"));
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
}

pub fn print(rows: &[Vec<String>]) {
    print!("{}", render(rows));
}

/// Prints `value` as indented JSON.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Json,
}

/// `-o json` of the list commands.
#[derive(clap::Args)]
pub struct ListArgs {
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<Output>,
}

#[macro_export]
macro_rules! row {
    ($($cell:expr),* $(,)?) => { vec![$($cell.to_string()),*] };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_over_runs_of_lines_as_gos_tabwriter() {
        // the last line shares the run of lines with a first cell
        // (Go's column blocks), the two before it the second column
        let text = "Probe time:\t2024\nNodes:\n  a:\n      ICMP to stack:\tOK\n      HTTP to agent:\tOK, RTT=1ms\nx\ty\tz\n";
        assert_eq!(
            tabwrite(text, 2, 3),
            "Probe time:   2024\nNodes:\n  a:\n      ICMP to stack:   OK\n      HTTP to agent:   OK, RTT=1ms\nx                      y   z\n"
        );
    }
}
