// Behaviour every page shares, bound here because the Content-Security-Policy allows no inline
// handlers (docs/security.md):
//   <select data-autosubmit>  submits its form when its value changes;
//   <form data-no-submit>     is never submitted by the browser (its script sends it).
(function () {
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t && t.matches && t.matches("[data-autosubmit]") && t.form) t.form.submit();
  });
  document.addEventListener("submit", function (e) {
    if (e.target && e.target.matches && e.target.matches("form[data-no-submit]")) e.preventDefault();
  });
})();
