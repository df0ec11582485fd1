"use strict";
// The navigation every page shares is one row; on a narrow screen it scrolls sideways. So
// that nothing in it is lost there: the current page's item is brought into view (centred)
// when the page opens, an edge that hides more items fades out under a chevron (a tap
// scrolls that way), and the counts of the items hidden past an edge are added up on its
// chevron, so a problem on Health shows on every page. The chevrons are for eyes and
// fingers only: every item stays a link in the row, reachable by Tab and read by screen
// readers with its own count.

(() => {
  function edge(side, mark) {
    const count = document.createElement("span");
    count.className = "badge";
    count.hidden = true;
    const button = document.createElement("button");
    button.type = "button";
    button.className = `edge ${side}`;
    button.tabIndex = -1;
    button.hidden = true;
    button.setAttribute("aria-hidden", "true");
    button.append(count, mark);
    return { button, count };
  }

  // What the badges past an edge add up to; ``past(rect)`` says whether an item is there.
  function hiddenCount(strip, past) {
    let sum = 0;
    for (const badge of strip.querySelectorAll(".badge")) {
      if (badge.hidden) continue;
      if (past(badge.getBoundingClientRect())) sum += Number(badge.textContent) || 0;
    }
    return sum;
  }

  function show(side, sum) {
    side.count.hidden = sum === 0;
    side.count.textContent = String(sum);
  }

  function setUp(nav) {
    const strip = nav.querySelector(".strip");
    if (!strip) return;
    const start = edge("start", "‹");
    const end = edge("end", "›");
    nav.append(start.button, end.button);
    const current = strip.querySelector("[aria-current='page']");
    // Once the row is scrolled by anything but centre() (a finger, the wheel, the focus
    // moving to an item, a chevron), it stays where it was put.
    let moved = false;
    let placed = strip.scrollLeft;
    const step = (direction) => () => {
      strip.scrollBy({ left: direction * strip.clientWidth * 0.7, behavior: "smooth" });
    };
    start.button.addEventListener("click", step(-1));
    end.button.addEventListener("click", step(1));
    function centre() {
      if (!current || moved) return;
      strip.scrollLeft = current.offsetLeft - (strip.clientWidth - current.offsetWidth) / 2;
      placed = strip.scrollLeft; // as the browser clamped it
    }

    let queued = false;
    function update() {
      queued = false;
      const room = strip.scrollWidth - strip.clientWidth;
      start.button.hidden = strip.scrollLeft <= 1;
      end.button.hidden = strip.scrollLeft >= room - 1;
      const box = strip.getBoundingClientRect();
      // an item under a shown chevron counts as hidden: its badge cannot be read there
      const left = box.left + (start.button.hidden ? 0 : start.button.offsetWidth);
      const right = box.right - (end.button.hidden ? 0 : end.button.offsetWidth);
      show(start, start.button.hidden ? 0 : hiddenCount(strip, (r) => r.left < left));
      show(end, end.button.hidden ? 0 : hiddenCount(strip, (r) => r.right > right));
    }
    function later() {
      if (!queued) {
        queued = true;
        requestAnimationFrame(update);
      }
    }

    centre();
    update();
    strip.addEventListener(
      "scroll",
      () => {
        if (Math.abs(strip.scrollLeft - placed) > 1) moved = true;
        later();
      },
      { passive: true },
    );
    window.addEventListener("resize", later);
    // the counts change as the event stream reports them (common.js); one that widens an
    // item before the person moved the row keeps the current item centred
    new MutationObserver(() => {
      centre();
      later();
    }).observe(strip, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
  }

  document.querySelectorAll("nav.sections").forEach(setUp);
})();
