"use strict";
// The web chat page. Messages go out with a POST (multipart: text, a random id so a retry
// is not a second message, files); everything coming back arrives on one WebSocket:
// "hello" (the transcript so far), "message", "delta" (a fragment of an answer being
// written), "typing" and "done" (a turn is over: stop "typing", and drop streamed text
// that no answer will replace). User text and streamed fragments are shown with textContent;
// finished answers come as HTML the server rendered from markdown with raw HTML escaped.
// While a turn runs, Stop sends /stop; what the turn had written stays, marked as stopped
// (the server sends it as a "stopped" entry before the notice that says what was stopped).
// The microphone button records a voice message (MediaRecorder, up to five minutes); it goes
// as the "voice" part of the same POST, with whatever is typed, and is transcribed like a
// voice note from any channel. It shows only where the gateway transcribes voice notes
// (hello.hears: [voice] is set) and the browser lends a microphone, which browsers do only
// for a secure page (https or this machine's own address) and after the person allows it.
// When this browser is signed out (its Sign out, `switchboard web --sign-out-all`, expiry),
// the server closes the socket with code 4401 and a reason: the conversation leaves the page,
// the reason is shown, and nothing reconnects. Every request carries the page key
// (session.js): the socket offers it as a subprotocol, and files are fetched with it and
// handed to the browser as a download, not opened by their address (a navigation carries
// no key).

(() => {
  if (Session.leaving()) return; // no key: on the way to the sign-in page
  const list = document.getElementById("messages");
  const form = document.getElementById("composer");
  const textBox = document.getElementById("text");
  const fileInput = document.getElementById("files");
  const chosen = document.getElementById("chosen");
  const sendError = document.getElementById("send-error");
  const connection = document.getElementById("connection");
  const typing = document.getElementById("typing");
  const emptyHint = document.getElementById("empty"); // shown (by CSS) until a message arrives
  const stopButton = document.getElementById("stop");
  const recordButton = document.getElementById("record");
  const recordLabel = recordButton.querySelector(".sr");
  const MAX_RECORDING_MS = 5 * 60 * 1000;
  const SIGNED_OUT = 4401; // the socket's close code when this browser's session ended
  let recording = null; // {recorder, stream, timer, started} while the microphone records
  let sending = 0; // messages sent whose own entry has not shown yet
  const seen = new Set();
  const streaming = new Map(); // turn id -> element with the streamed text
  let socket = null;
  let retryDelay = 500;
  let typingTimer = null;
  let busy = false; // a turn runs: Stop is offered

  function randomId() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes); // works on plain http too, unlike randomUUID
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function setConnection(state, label) {
    connection.dataset.state = state;
    connection.textContent = label;
  }

  function nearBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  }

  function scrollDown(force) {
    if (force || nearBottom()) list.scrollTop = list.scrollHeight;
  }

  function timeLabel(at) {
    const date = new Date(at * 1000);
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function bubble(role, kind) {
    const item = document.createElement("article");
    item.className = `msg ${role} ${kind || ""}`.trim();
    const body = document.createElement("div");
    body.className = "body";
    item.append(body);
    return [item, body];
  }

  function renderEntry(entry) {
    const [item, body] = bubble(entry.role, entry.kind);
    item.dataset.id = entry.id;
    if (entry.turn) item.dataset.turn = entry.turn;
    if (entry.kind === "stopped") {
      body.textContent = entry.text; // as it was streamed, cut where the turn stopped
      const mark = document.createElement("span");
      mark.className = "mark";
      mark.textContent = "Stopped before it finished.";
      item.append(mark);
    } else if (entry.role === "assistant" && typeof entry.html === "string") {
      body.innerHTML = entry.html; // rendered by the server with all raw HTML escaped
    } else {
      body.textContent = entry.text;
    }
    if (entry.files && entry.files.length) {
      const files = document.createElement("ul");
      files.className = "files";
      for (const file of entry.files) {
        const li = document.createElement("li");
        const link = document.createElement("a");
        link.href = `/api/chat/files/${encodeURIComponent(entry.id)}/${file.index}`;
        link.textContent = `${file.kind === "image" ? "image" : "file"}: ${file.name}`;
        link.addEventListener("click", (event) => {
          event.preventDefault();
          download(link.href, file.name);
        });
        li.append(link);
        files.append(li);
      }
      item.append(files);
    }
    const meta = document.createElement("time");
    meta.textContent = timeLabel(entry.at);
    item.append(meta);
    return item;
  }

  // A file of the conversation, fetched with the key and saved under its name.
  async function download(path, name) {
    showError("");
    try {
      const response = await Session.fetch(path);
      if (response.status === 401) {
        Session.signIn(await Session.refusal(response));
        return;
      }
      if (!response.ok) {
        const answer = await response.json().catch(() => ({}));
        showError(answer.error || `Could not fetch ${name} (${response.status}).`);
        return;
      }
      const url = URL.createObjectURL(await response.blob());
      const save = document.createElement("a");
      save.href = url;
      save.download = name;
      document.body.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (err) {
      showError(`Could not reach the gateway to fetch ${name}.`);
    }
  }

  function addEntry(entry) {
    if (seen.has(entry.id)) return;
    seen.add(entry.id);
    const stick = nearBottom() || entry.role === "user";
    const item = renderEntry(entry);
    const live = entry.turn ? streaming.get(entry.turn) : null;
    if (entry.role === "user") sending = Math.max(0, sending - 1);
    // its answer may have begun streaming before the page heard of the question (a busy
    // gateway): the question goes before it, as it was asked
    const early = entry.role === "user" ? list.querySelector(".msg.streaming[data-after-send]") : null;
    if (early) {
      delete early.dataset.afterSend;
      list.insertBefore(item, early);
    } else if (live && (entry.kind === "reply" || entry.kind === "notice" || entry.kind === "stopped")) {
      live.replaceWith(item); // the delivered answer is the authoritative one
      streaming.delete(entry.turn);
    } else if (live) {
      list.insertBefore(item, live); // a progress message of the turn still being written
    } else {
      list.append(item);
    }
    if (entry.role === "assistant") hideTyping();
    scrollDown(stick);
  }

  function addDelta(turn, text) {
    let item = streaming.get(turn);
    const stick = nearBottom();
    if (!item) {
      let body;
      [item, body] = bubble("assistant", "streaming");
      item.dataset.turn = turn;
      if (sending > 0) item.dataset.afterSend = "1"; // begun before our question showed
      body.textContent = "";
      streaming.set(turn, item);
      list.append(item);
    }
    item.querySelector(".body").textContent += text;
    hideTyping();
    setBusy(true);
    scrollDown(stick);
  }

  function setBusy(running) {
    busy = running;
    stopButton.hidden = !running;
  }

  function endTurn(turn, answered) {
    hideTyping();
    setBusy(false);
    const live = streaming.get(turn);
    if (live && !answered) {
      live.remove(); // no answer will replace it: the turn ended without one
      streaming.delete(turn);
    }
  }

  function showTyping() {
    typing.hidden = false;
    setBusy(true);
    clearTimeout(typingTimer);
    typingTimer = setTimeout(hideTyping, 6000);
  }

  function hideTyping() {
    typing.hidden = true;
    clearTimeout(typingTimer);
  }

  function reset(hello) {
    list.replaceChildren(emptyHint);
    seen.clear();
    streaming.clear();
    // Offered where the gateway transcribes voice notes and the browser lends a microphone.
    const canRecord = Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
    recordButton.hidden = !(hello.hears && canRecord && window.MediaRecorder);
    if (hello.agent) {
      document.getElementById("agent-name").textContent = hello.agent;
      document.title = `${hello.agent} · chat`;
    }
    setBusy(false);
    for (const entry of hello.entries) addEntry(entry);
    for (const s of hello.streaming) addDelta(s.turn, s.text);
    scrollDown(true);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${location.host}/api/chat/socket`, Session.protocols());
    socket.onopen = () => {
      retryDelay = 500;
      setConnection("open", "connected");
    };
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.type === "hello") reset(data);
      else if (data.type === "message") addEntry(data.entry);
      else if (data.type === "delta") addDelta(data.turn, data.text);
      else if (data.type === "typing") showTyping();
      else if (data.type === "done") endTurn(data.turn, data.answered);
    };
    socket.onclose = async (event) => {
      if (event.code === SIGNED_OUT) {
        signedOut(event.reason || "signed out: sign in again");
        return;
      }
      setConnection("closed", "reconnecting…");
      try {
        const check = await Session.fetch("/api/status");
        if (check.status === 401) {
          Session.signIn(await Session.refusal(check)); // signed out, or the key refused
          return;
        }
      } catch (err) {
        // the gateway is down or restarting: keep trying
      }
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 10000);
    };
  }

  function signedOut(reason) {
    setConnection("closed", "signed out");
    hideTyping();
    setBusy(false);
    seen.clear();
    streaming.clear();
    const note = document.createElement("div");
    note.className = "empty";
    note.setAttribute("role", "alert");
    const text = document.createElement("p");
    const what = document.createElement("strong");
    what.textContent = reason.charAt(0).toUpperCase() + reason.slice(1) + ".";
    const link = document.createElement("a");
    link.href = "/login?next=/";
    link.textContent = "Sign in";
    text.append(what, " ", link);
    note.append(text);
    list.replaceChildren(note);
  }

  function showChosen() {
    const names = Array.from(fileInput.files, (f) => f.name);
    chosen.hidden = names.length === 0;
    chosen.textContent = names.length ? `Attached: ${names.join(", ")}` : "";
  }

  function showError(message) {
    sendError.textContent = message;
    sendError.hidden = !message;
  }

  async function send(command, voice) {
    const text = command || textBox.value;
    const files = command ? [] : Array.from(fileInput.files);
    if (!text.trim() && files.length === 0 && !voice) return;
    const data = new FormData();
    data.append("id", randomId());
    data.append("text", text);
    for (const file of files) data.append("file", file, file.name);
    if (voice) data.append("voice", voice, `voice message.${voice.type.includes("ogg") ? "ogg" : "webm"}`);
    const button = document.getElementById("send");
    button.disabled = true;
    showError("");
    sending += 1; // until its entry shows (from the answer to this POST, or the event stream)
    try {
      for (let attempt = 0; ; attempt++) {
        let response;
        try {
          response = await Session.fetch("/api/chat/messages", { method: "POST", body: data });
        } catch (err) {
          if (attempt < 2) continue; // same id: the gateway stores it once
          throw err;
        }
        if (response.status === 401) {
          sending = Math.max(0, sending - 1);
          Session.signIn(await Session.refusal(response));
          return;
        }
        const answer = await response.json().catch(() => ({}));
        if (!response.ok) {
          sending = Math.max(0, sending - 1);
          showError(answer.error || `Could not send (${response.status}).`);
          return;
        }
        if (answer.entry) addEntry(answer.entry);
        break;
      }
      if (!command) {
        textBox.value = "";
        fileInput.value = "";
        showChosen();
        autosize();
      }
    } catch (err) {
      sending = Math.max(0, sending - 1);
      showError("Could not reach the gateway; your message is still here.");
    } finally {
      button.disabled = false;
      textBox.focus();
    }
  }

  function showRecording() {
    const on = recording !== null;
    recordButton.classList.toggle("recording", on);
    recordButton.setAttribute("aria-pressed", String(on));
    let label = "Record a voice message";
    textBox.placeholder = "Message";
    if (on) {
      const seconds = Math.floor((Date.now() - recording.started) / 1000);
      const elapsed = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
      label = `Stop and send (${elapsed})`;
      // where the eye is on a phone: what is being recorded, and how to send it
      textBox.placeholder = `Recording… ${elapsed}, tap the microphone to send`;
    }
    recordButton.title = label;
    recordLabel.textContent = label;
  }

  async function toggleRecording() {
    if (recording) {
      recording.recorder.stop(); // its "stop" event sends what was recorded
      return;
    }
    showError("");
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (err) {
      showError(`The microphone is not available (${err.name}): allow it for this page to record.`);
      return;
    }
    const recorder = new MediaRecorder(stream);
    const chunks = [];
    recorder.addEventListener("dataavailable", (event) => {
      if (event.data.size) chunks.push(event.data);
    });
    recorder.addEventListener("stop", () => {
      clearInterval(recording.timer);
      for (const track of stream.getTracks()) track.stop();
      recording = null;
      showRecording();
      const voice = new Blob(chunks, { type: recorder.mimeType || "audio/webm" });
      if (voice.size) send(undefined, voice);
    });
    recorder.start();
    recording = { recorder, stream, started: Date.now(), timer: 0 };
    recording.timer = setInterval(() => {
      if (Date.now() - recording.started >= MAX_RECORDING_MS) recorder.stop();
      else showRecording();
    }, 500);
    showRecording();
  }

  function autosize() {
    textBox.style.height = "auto";
    textBox.style.height = `${Math.min(textBox.scrollHeight, 200)}px`;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  stopButton.addEventListener("click", () => {
    if (busy) send("/stop");
  });
  textBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  textBox.addEventListener("input", autosize);
  fileInput.addEventListener("change", showChosen);
  recordButton.addEventListener("click", toggleRecording);
  connect();
})();
