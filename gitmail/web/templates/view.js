// gitmail view: new mail appears without a reload. Every few seconds the page asks the server for the mailbox's
// change token; when it moved, the page is fetched again and its <main> swapped in. The browser parses the new page
// (XMLHttpRequest's document response): no HTML is ever built from strings here, and the page's Trusted Types
// policy would refuse it if it were. Status text is set with textContent.
"use strict";
(() => {
  const body = document.body;
  const status = document.getElementById("live");
  const seconds = Number(body.dataset.poll) || 2;
  let token = body.dataset.token;
  let busy = false;

  const say = (text, offline) => {
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("offline", Boolean(offline));
  };

  const fetchPage = () =>
    new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("GET", window.location.pathname + window.location.search);
      request.responseType = "document";
      request.onload = () => (request.status === 200 && request.response ? resolve(request.response) : reject());
      request.onerror = reject;
      request.send();
    });

  // A form being written in is never swapped away: the page says new mail is there instead. A form sent once is
  // not sent again by a second click (the server refuses a spent token anyway).
  let writing = false;
  document.addEventListener("input", (event) => {
    if (event.target.closest && event.target.closest("form[method=post]")) writing = true;
  });
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.dataset.sent) {
      event.preventDefault();
      return;
    }
    form.dataset.sent = "1";
    for (const button of form.querySelectorAll("button")) button.disabled = true;
  });

  const check = async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch("/changes", { cache: "no-store", credentials: "same-origin" });
      if (!response.ok) throw new Error(String(response.status));
      const now = (await response.json()).token;
      if (now !== token && writing) {
        say("new mail: it shows once this form is sent");
      } else if (now !== token) {
        const fresh = await fetchPage();
        const main = fresh.querySelector("main");
        if (main) document.querySelector("main").replaceWith(document.adoptNode(main));
        token = fresh.body.dataset.token || now;
        body.dataset.token = token;
        say("updated " + new Date().toLocaleTimeString());
      } else if (status && status.classList.contains("offline")) {
        say("live");
      }
    } catch (error) {
      say("not connected: is gitmail view still running?", true);
    } finally {
      busy = false;
    }
  };

  window.setInterval(check, seconds * 1000);
  document.addEventListener("visibilitychange", check);
})();
