// Live refresh without a framework: a block marked data-live="yes" is fetched again
// from its data-live-url every few seconds and swapped in, until the server renders
// it with data-live="no" (nothing left running). Pages work without JavaScript.
"use strict";
(function () {
  const REFRESH_MS = 3000;

  function schedule(block) {
    if (block.dataset.live !== "yes") return;
    window.setTimeout(function () { refresh(block.id); }, REFRESH_MS);
  }

  async function refresh(id) {
    const block = document.getElementById(id);
    if (!block) return;
    // Not while someone is using a control inside it (an open <details>, a focused button).
    if (block.contains(document.activeElement) && document.activeElement !== document.body) {
      schedule(block);
      return;
    }
    try {
      const response = await fetch(block.dataset.liveUrl, { credentials: "same-origin" });
      if (!response.ok) { schedule(block); return; }
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();
      const fresh = holder.querySelector("#" + id);
      if (!fresh) return;
      keepOpenDetails(block, fresh);
      block.replaceWith(fresh);
      schedule(fresh);
    } catch (error) {
      schedule(block);
    }
  }

  function keepOpenDetails(old, fresh) {
    const open = Array.from(old.querySelectorAll("details")).map(function (d) { return d.open; });
    fresh.querySelectorAll("details").forEach(function (d, index) { if (open[index]) d.open = true; });
  }

  document.addEventListener("submit", function (event) {
    const message = event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live-url]").forEach(schedule);
  });
})();
