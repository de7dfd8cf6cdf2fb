// racetest report: a readout for the timeline's marks (a projector shows no
// tooltips), and every story unfolded on paper.
(function () {
  "use strict";
  document.querySelectorAll("figure.timeline-fig").forEach(function (fig) {
    var out = fig.querySelector(".readout");
    fig.querySelectorAll("g.lane, circle.mark").forEach(function (el) {
      var show = function (ev) {
        out.textContent = el.querySelector("title").textContent;
        ev.stopPropagation();
      };
      el.addEventListener("mouseover", show);
      el.addEventListener("click", show);
    });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  document.documentElement.setAttribute("data-script", "ran");
})();
