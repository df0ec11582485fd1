"""Text as people see it: names and lines shown safely (textutil), words shown exactly as
written whatever the chat's markdown would make of them (verbatim), and two edits of one
file merged (merge)."""
