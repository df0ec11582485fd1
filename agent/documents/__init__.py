"""Documents people send, read as text: PDF, DOCX, XLSX, CSV, PPTX, HTML, EPUB.

``formats`` extracts (run only inside the worker process), ``worker`` is that process
(limits set on itself before it opens the file), ``reader`` runs it from the gateway with a
timeout, ``ranges`` parses page ranges, ``render`` turns an extract into what the model reads.
"""
