/* The overview's stream table (app/ui/streamgrid.py): a stream's name links to its
   target page (under the grid's context.targets) inside the app, as dcc.Link does (a modified click opens it as a link
   would). React escapes the name: a scraped label is text, never markup. */
var dagcomponentfuncs = (window.dashAgGridComponentFunctions =
  window.dashAgGridComponentFunctions || {});

dagcomponentfuncs.StreamLink = function (props) {
  var model = props.data.model;
  var href =
    props.context.targets +
    encodeURIComponent(props.data.target) +
    (model ? "?model=" + encodeURIComponent(model) : "");
  return React.createElement(
    "a",
    {
      href: href,
      className: "stream-link",
      onClick: function (e) {
        if (e.metaKey || e.shiftKey || e.altKey || e.ctrlKey || e.button !== 0) {
          return;
        }
        e.preventDefault();
        window.history.pushState({}, "", href);
        window.dispatchEvent(new CustomEvent("_dashprivate_pushstate"));
        window.scrollTo(0, 0);
      },
    },
    props.value
  );
};
