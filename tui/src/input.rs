//! The one-line editors: the query bar (`:`) and the process filter (`/`).

use ratatui::crossterm::event::{KeyCode, KeyEvent};

/// What an input line is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    Query,
    Filter,
}

/// A line being edited.
#[derive(Clone, Debug)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
    /// Cursor position in characters.
    pub cursor: usize,
    /// Position in the history while browsing it with Up and Down.
    browsing: Option<usize>,
}

impl Input {
    pub fn new(kind: InputKind, text: &str) -> Self {
        Self {
            kind,
            text: text.to_owned(),
            cursor: text.chars().count(),
            browsing: None,
        }
    }

    /// The prompt shown before the text.
    pub fn prompt(&self) -> &'static str {
        match self.kind {
            InputKind::Query => ":",
            InputKind::Filter => "process: ",
        }
    }

    fn byte(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(i, _)| i)
    }

    /// Plain editing keys: characters, Backspace, Delete, arrows, Home, End.
    pub fn edit(&mut self, key: KeyEvent) {
        let len = self.text.chars().count();
        match key.code {
            KeyCode::Char(c) => {
                let at = self.byte(self.cursor);
                self.text.insert(at, c);
                self.cursor += 1;
            }
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                let at = self.byte(self.cursor);
                self.text.remove(at);
            }
            KeyCode::Delete if self.cursor < len => {
                let at = self.byte(self.cursor);
                self.text.remove(at);
            }
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(len),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = len,
            _ => {}
        }
    }

    /// Steps through earlier queries: `step` -1 is older, 1 newer; past
    /// the newest the line is empty again.
    pub fn history(&mut self, history: &[String], step: i64) {
        if history.is_empty() {
            return;
        }
        let next = match (self.browsing, step < 0) {
            (None, true) => Some(history.len() - 1),
            (None, false) => None,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) => (i + 1 < history.len()).then_some(i + 1),
        };
        self.browsing = next;
        self.text = next.map(|i| history[i].clone()).unwrap_or_default();
        self.cursor = self.text.chars().count();
    }

    /// Tab: completes the word before the cursor with a source name (the
    /// first word) or a field of the query's source. Returns the
    /// candidates when there is more than one, for the status line.
    pub fn complete(&mut self, schema: &[(String, Vec<String>)]) -> String {
        let at = self.byte(self.cursor);
        let before = &self.text[..at];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        let first_word = before[..start].trim().is_empty();
        let candidates: Vec<&str> = if first_word {
            schema.iter().map(|(source, _)| source.as_str()).collect()
        } else {
            let source = self.text.split_whitespace().next().unwrap_or_default();
            schema
                .iter()
                .filter(|(name, _)| name == source)
                .flat_map(|(_, fields)| fields.iter().map(String::as_str))
                .collect()
        };
        let matching: Vec<&str> = candidates
            .into_iter()
            .filter(|c| c.starts_with(word))
            .collect();
        let Some(first) = matching.first() else {
            return format!("no source or field starts with `{word}`");
        };
        let common = matching.iter().fold(*first, |common, c| {
            let shared = common
                .char_indices()
                .zip(c.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((i, a), _)| i + a.len_utf8());
            &common[..shared]
        });
        let mut completed = common.to_owned();
        if matching.len() == 1 {
            completed.push(' ');
        }
        let added = &completed[word.len()..];
        self.text.insert_str(at, added);
        self.cursor += added.chars().count();
        if matching.len() > 1 {
            matching.join(" ")
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::KeyModifiers;

    use super::*;

    fn schema() -> Vec<(String, Vec<String>)> {
        vec![
            (
                "syscalls".into(),
                vec!["dur".into(), "name".into(), "tid".into(), "time".into()],
            ),
            ("sched".into(), vec!["runq".into(), "off_cpu".into()]),
        ]
    }

    fn typed(text: &str) -> Input {
        let mut input = Input::new(InputKind::Query, "");
        for c in text.chars() {
            input.edit(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        input
    }

    #[test]
    fn completes_sources_then_fields_of_the_source() {
        let mut input = typed("sy");
        assert_eq!(input.complete(&schema()), "");
        assert_eq!(input.text, "syscalls ");
        let mut input = typed("s");
        assert_eq!(input.complete(&schema()), "syscalls sched");
        assert_eq!(input.text, "s");
        let mut input = typed("syscalls where d");
        input.complete(&schema());
        assert_eq!(input.text, "syscalls where dur ");
        let mut input = typed("syscalls where ti");
        assert_eq!(input.complete(&schema()), "tid time");
        assert_eq!(input.text, "syscalls where ti");
        let mut input = typed("sched | p99(r");
        input.complete(&schema());
        assert_eq!(input.text, "sched | p99(runq ");
        assert!(
            typed("syscalls where x")
                .complete(&schema())
                .contains("`x`")
        );
    }

    #[test]
    fn edits_in_the_middle_and_walks_history() {
        let mut input = typed("sycalls");
        input.edit(KeyEvent::new(KeyCode::Home, KeyModifiers::NONE));
        input.edit(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
        input.edit(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
        input.edit(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
        assert_eq!(input.text, "syscalls");
        input.edit(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
        assert_eq!(input.text, "sycalls");
        let history = vec!["a".to_owned(), "b".to_owned()];
        input.history(&history, -1);
        assert_eq!(input.text, "b");
        input.history(&history, -1);
        input.history(&history, -1);
        assert_eq!(input.text, "a");
        input.history(&history, 1);
        assert_eq!(input.text, "b");
        input.history(&history, 1);
        assert_eq!(input.text, "");
    }
}
